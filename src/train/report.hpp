// What the user sees while training: the per-step progress line on rank 0 and the JSON-lines metrics file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hetrain::train {

// This rank's memory, in MiB, for the metrics (docs/report.md): the process's resident host memory now and
// at most so far, and hetrain's own device allocations now and at most so far (cuda::device_memory_use;
// zeros on a CPU rank).
struct MemoryFigures {
  double host_mib = 0, host_peak_mib = 0, device_mib = 0, device_peak_mib = 0;
};
MemoryFigures memory_figures();
// The run's memory line: "memory: highest resident 410 MiB (rank 1 of 2); hetrain's own GPU memory at most
// 1.2 GiB (rank 3)", from each rank's peaks; the GPU part only where some rank allocated on its GPU.
std::string memory_summary(const std::vector<MemoryFigures>& per_rank);

// One step as every rank measured it, gathered on rank 0.
struct StepTimes {
  double batch = 0;    // samples this rank computed (b_r)
  double compute = 0;  // forward + backward (+ emulated sleep) seconds
  double wait = 0;     // seconds blocked waiting for the batch
  double comm = 0;     // seconds in the gradient reduction
  double idle = 0;     // seconds waiting for the other ranks to arrive at the step's agreement
  double exposed = 0;  // seconds of gradient reduction not hidden behind backward: waiting for it after the
                       // agreement (docs/architecture.md, "Gradient reduction"); all of it with --bucket-mb 0
  MemoryFigures memory;  // at the end of the step
};

struct StepRecord {
  int64_t step = 0, epoch = 0;
  double loss = 0, accuracy = 0, lr = 0;
  double step_seconds = 0;         // wall time of the step on rank 0
  double val_loss = -1, val_accuracy = -1;  // the last step of an epoch with a validation set; -1 otherwise
  double loss_scale = 0;           // fp16: the loss scale after the step (train/loss_scale.hpp); 0 otherwise
  bool skipped = false;            // fp16: the step overflowed and was skipped on every rank
  std::vector<StepTimes> ranks;    // one per rank
  int64_t global_batch() const;
  double samples_per_second() const { return step_seconds > 0 ? global_batch() / step_seconds : 0; }
  // busy time / (ranks × step time): 1 when every rank computes the whole step.
  double balance_efficiency() const;
  // The largest exposed reduction time of any rank / step time.
  double exposed_share() const;
};

// One metrics line of the asynchronous and hybrid modes (docs/report.md): a window of rank 0's local steps.
// Per-rank figures come from the ranks' counters in the shared sample counter, so no rank waits for it.
struct ElasticRecord {
  std::string mode;                  // async | hybrid
  int64_t step = 0, epoch = 0;       // the global step (samples handed out / B) and its epoch
  int64_t samples = 0;               // the global sample counter: samples handed out so far
  double loss = 0, accuracy = 0, lr = 0;  // rank 0's group over the window
  double window_s = 0;               // wall seconds of the window (rank 0's clock)
  double val_loss = -1, val_accuracy = -1;  // the newest validation of the center since the last line; -1: none
  double loss_scale = 0;             // fp16: rank 0's loss scale (train/loss_scale.hpp); 0 otherwise
  struct Rank {
    int group = 0;                   // group number (0, 1, ... in the order of the leaders' ranks)
    double samples = 0;              // samples trained in the window
    double group_samples = 0;        // samples trained in the window by the rank's whole group
    double pushes = 0, staleness = 0;  // trades with the center in the window, and the sum of their staleness
    double compute = 0, wait = 0, comm = 0, idle = 0;  // seconds in the window (idle: waiting for group mates)
    double skipped = 0;              // local steps skipped for an FP16 overflow in the window
    MemoryFigures memory;            // at the rank's newest local step
  };
  std::vector<Rank> ranks;
};

// JSON-lines writer; one object per step. Written to PATH.tmp-PID and renamed at close(), so a crashed run
// leaves no file that looks complete and two runs never share a temporary file. Every line is flushed, and
// a failed write is remembered at once (error()) rather than found at close.
class MetricsFile {
 public:
  explicit MetricsFile(const std::string& path);  // throws naming the path when it cannot be written
  ~MetricsFile();
  void write(const StepRecord& r);
  void write(const ElasticRecord& r);
  const std::string& error() const { return error_; }  // empty while every write succeeded
  void close();                                         // throws on a write error, now or earlier

 private:
  void end_line();
  std::string path_, tmp_, error_;
  std::FILE* file_ = nullptr;
};

}  // namespace hetrain::train
