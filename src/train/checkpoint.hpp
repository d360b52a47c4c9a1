// Checkpoint files: one HDF5 file per checkpoint, written atomically, verified on load
// (docs/checkpoint-format.md). This unit knows the file; when and by whom it is written is the trainer's
// business (train/resume.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"

namespace hetrain::train {

// Everything in a checkpoint except the tensors.
struct CheckpointInfo {
  // the model
  std::string model;
  std::vector<int64_t> input_shape;  // C, H, W
  int num_classes = 0;
  // where the run stands
  int64_t global_step = 0;       // steps completed: the next step to run
  int64_t epoch = 0, step_in_epoch = 0, samples_in_epoch = 0;
  // The samples of the run's order trained so far (epoch * num_samples + position in the epoch's order),
  // exact in every mode; -1 in checkpoints written before it existed (docs/checkpoint-format.md).
  int64_t sample_position = -1;
  int64_t steps_per_epoch = 0, global_batch = 0, num_samples = 0;
  uint64_t seed = 0;
  int world_size = 0;
  // how it learns
  optim::ScheduleConfig schedule;
  float peak_lr = 0;
  int64_t total_steps = 0;
  optim::SgdConfig sgd;
  double loss_scale = 0;              // fp16 runs: the dynamic loss scale (train/loss_scale.hpp); 0 otherwise
  int64_t loss_scale_good_steps = 0;  // good steps since the scale last changed
  std::string config_text;       // TrainConfig::canonical()
  // the balancer (informational)
  std::vector<int64_t> split;
  std::vector<double> alpha, beta;
};

// Host copies of a model's tensors in the flat layout of its ParamBuffer.
struct CheckpointTensors {
  std::vector<float> values;    // [params.count()]
  std::vector<float> states;    // [params.state_count()]: BN running statistics
  std::vector<float> momentum;  // [params.count()]
  int64_t num_batches_tracked = 0;
  // --ema-decay runs: the moving average of the weights (optim::WeightAverage), in the same layout; empty
  // when the run keeps none.
  std::vector<float> ema_values, ema_states;
  int64_t ema_updates = 0;
  bool has_ema() const { return !ema_values.empty(); }
  // --compress powersgd:R runs (dist::PowerSgd): the factors Q of the warm start, and every rank's error
  // feedback, a row of params.count() per rank of the run that wrote it ([powersgd_rows, count]); empty
  // otherwise.
  std::vector<float> powersgd_q, powersgd_error;
  int64_t powersgd_rank = 0, powersgd_rows = 0;
  bool has_powersgd() const { return !powersgd_error.empty(); }
};

// Writes `path` atomically: PATH.tmp-PID in the same folder, flushed and fsync'ed, renamed, folder fsync'ed.
// Throws hetrain::Error naming the path and the cause (disk full, folder gone, ...); the temporary file is
// removed and nothing at `path` changes.
void write_checkpoint(const std::string& path, const CheckpointInfo& info, const nn::ParamBuffer& layout,
                      const CheckpointTensors& tensors);

// Reads the attributes only (to build the right model before reading its tensors). Throws naming the
// file when it is not a readable hetrain checkpoint of a known version.
CheckpointInfo read_checkpoint_info(const std::string& path);

// Reads and verifies every tensor against `layout` (names, shapes, types) and the checksum.
CheckpointTensors read_checkpoint_tensors(const std::string& path, const nn::ParamBuffer& layout);

// ---------------------------------------------------------------- the checkpoint folder
// "DIR/checkpoint-00000123.h5"
std::string checkpoint_path(const std::string& dir, int64_t global_step);
// Checkpoint files in `dir`, newest (highest step) first. Empty when the folder has none.
std::vector<std::string> list_checkpoints(const std::string& dir);
// The step in a checkpoint file's name ("DIR/checkpoint-00000123.h5" -> 123); -1 for other names.
int64_t checkpoint_step(const std::string& path);
// Keeps the `keep` highest-numbered files of `prunable` (checkpoints this run may remove: those it wrote,
// and the earlier ones of the run it continues), removes the others from disk and from the list; returns
// what it removed. Files not on the list are never touched (docs/checkpoint-format.md, "Files in the checkpoint folder").
std::vector<std::string> prune_checkpoints(std::vector<std::string>& prunable, int keep);
// Removes "checkpoint-*.h5.tmp-PID" files whose writer (PID on this host) is gone; returns them.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);
// Throws naming the folder when it cannot be created or written (checked by writing and removing a file).
void check_writable_folder(const std::string& dir, const char* option);

}  // namespace hetrain::train
