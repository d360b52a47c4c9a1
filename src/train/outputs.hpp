// The files a training run writes besides checkpoints: --metrics (rank 0), --dump-samples and
// --dump-params (%r = one per rank). Every path is opened or probed at start-up, collectively, so a bad
// path fails at once and not after hours; a failed write is noticed when it happens; and every rank learns
// the outcome before any of them finalizes MPI (a rank that finalized cannot be told to stop).
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/train.hpp"
#include "train/report.hpp"

namespace hetrain::train {

class Outputs {
 public:
  // Collective: throws AgreedError on every rank when some rank cannot write one of its outputs.
  Outputs(const TrainConfig& cfg, const dist::World& world);
  ~Outputs();

  bool logs_samples() const { return samples_ != nullptr; }
  bool writes_metrics() const { return metrics_ != nullptr; }  // rank 0 with --metrics
  void log_samples(int64_t epoch, const std::vector<int64_t>& indices);
  // Rank 0: one metrics line. A failure is kept (metrics_failed()) for the step's agreement.
  void write_metrics(const StepRecord& record);
  void write_metrics(const ElasticRecord& record);  // the asynchronous modes' line (docs/report.md)
  bool metrics_failed() const { return metrics_ && !metrics_->error().empty(); }
  // Every rank, once the step's agreement said rank 0's metrics failed: throws AgreedError (rank 0's
  // carries the reason and is the one printed).
  [[noreturn]] void fail_agreed() const;
  // Collective, at the end of training: closes the metrics and sample logs and writes --dump-params;
  // throws AgreedError on every rank when any of it failed anywhere.
  void finish(const nn::ParamBuffer& params);

 private:
  std::string per_rank_path(const std::string& pattern) const;
  bool writes_params() const;  // this rank writes a --dump-params file
  const TrainConfig& cfg_;
  const dist::World& world_;
  std::unique_ptr<MetricsFile> metrics_;
  std::unique_ptr<std::ofstream> samples_;
  std::string samples_path_;
};

// The output-path rule (hetrain/output_paths.hpp) for hetrain train, on this rank: its outputs (--metrics on rank 0,
// --dump-samples, --dump-params, the checkpoints under --checkpoint-dir) against every input (--data, --val,
// --init-from, --resume, --config, a --model file). Throws one line; run inside the set-up's agreement, before
// anything is written.
void check_train_outputs(const TrainConfig& cfg, int rank);
// The same for hetrain eval (rank 0 writes): --dump-batch and --save-json against --checkpoint, --weights,
// --data and a --model file.
void check_eval_outputs(const EvalConfig& cfg);
// Writes `bytes` to `path` through PATH.tmp-PID and a rename; throws naming the path.
void write_file_atomically(const std::string& path, const void* bytes, size_t size, const char* option);
// Throws naming the option when `path` cannot be created later (folder missing or read-only, a folder).
void check_output_path(const std::string& path, const char* option);

}  // namespace hetrain::train
