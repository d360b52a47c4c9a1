// Resuming a run from a checkpoint: which file, whether it fits this run, and handing its tensors to
// every rank. Rank 0 alone reads the file (the checkpoint folder need only be visible there); the
// tensors travel by MPI_Bcast.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/train.hpp"
#include "train/checkpoint.hpp"

namespace hetrain::train {

// What this run must match for a checkpoint to continue it (the sample order depends on all of it).
struct RunIdentity {
  std::string model;
  std::vector<int64_t> input_shape;  // C, H, W
  int num_classes = 0;
  int64_t global_batch = 0, num_samples = 0, steps_per_epoch = 0;
  uint64_t seed = 0;
};

struct LoadedCheckpoint {
  std::string path;
  CheckpointInfo info;
  CheckpointTensors tensors;
};

struct ResumeChoice {
  std::optional<LoadedCheckpoint> checkpoint;  // none: start from the beginning
  std::vector<std::string> notes;              // lines for rank 0 to print (files skipped, settings that differ)
};

// Rank 0, before training: the checkpoint --resume names (auto: the newest in --checkpoint-dir that
// verifies, falling back past damaged ones; nothing when there is none). Throws naming the file and the
// mismatch for a checkpoint of another model, input shape, class count, global batch, dataset size or seed.
ResumeChoice load_for_resume(const TrainConfig& cfg, const RunIdentity& run,
                             const nn::ParamBuffer& layout, const std::string& canonical_config);

// Rank 0: the checkpoints in `dir` of the run this one continues from `resumed_step` (-1: none), which
// its pruning may remove: steps up to `resumed_step` whose header reads and matches `run`. Files of later
// steps, of other runs and damaged ones are not among them. `others` gets how many checkpoint files are
// not, and `newest_other` the highest-numbered of those ("" when none).
std::vector<std::string> checkpoints_continued(const std::string& dir, int64_t resumed_step, const RunIdentity& run,
                                               int& others, std::string& newest_other);

// Throws naming `path` and the first difference when `info` cannot continue `run`.
void check_compatible(const std::string& path, const CheckpointInfo& info, const RunIdentity& run);

// Collective: rank 0's tensors (when `has` is set there) reach every rank; returns whether there are any.
// Non-root ranks get `tensors` sized and filled.
bool broadcast_checkpoint(MPI_Comm comm, bool has, CheckpointTensors& tensors, int64_t& global_step,
                          const nn::ParamBuffer& layout);

// Copies checkpoint tensors into a model's host buffers and an optimizer's momentum buffer (both on the CPU).
void apply_checkpoint(const CheckpointTensors& tensors, nn::ParamBuffer& params, optim::Sgd* sgd);

}  // namespace hetrain::train
