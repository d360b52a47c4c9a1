// The synchronous mode's sample choice (docs/architecture.md, "Training loop"): step s of an epoch owns
// perm[s·S, (s+1)·S), S = B × --accumulate; micro-batch k of it owns [k·B, (k+1)·B) of those, and rank r takes
// [o_r, o_r + b_r) of each micro-batch with the split in force when the step was requested; batches are
// requested --prefetch steps ahead, so reading overlaps training.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/train.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

// One forward and backward of every rank: B samples of the step (fewer at the end of a partial step).
struct MicroBatch {
  int64_t size = 0;            // samples over all ranks
  std::vector<int64_t> split;  // b_r of every rank, Σ = size
};

// The work of one step as planned when its batch was requested: later rebalances do not change it.
struct PlannedStep {
  int64_t epoch = 0, step_in_epoch = 0, global_step = 0;
  int64_t global_batch = 0;       // samples of this step, B × --accumulate (smaller for a partial last step)
  std::vector<int64_t> split;     // b_r of every rank in the step's first micro-batch
  std::vector<MicroBatch> micro;  // the step's micro-batches, one without --accumulate, each a batch requested
  std::vector<int64_t> indices;   // this rank's samples (kept for --dump-samples, logged when trained on)
  int rank = 0;                   // this rank
  int64_t local_batch() const { return split[size_t(rank)]; }
  int64_t local_samples() const;  // this rank's samples over the micro-batches
};

class SyncPlanner {
 public:
  // Collective (every rank learns whether any rank trains on a GPU). `keep_indices`: the planned steps
  // keep their sample indices (for --dump-samples).
  SyncPlanner(const TrainConfig& cfg, Setup& s, const dist::World& world, bool keep_indices);

  // Requests batches up to --prefetch steps ahead, each with the split in force when it is requested.
  void fill();
  bool empty() const { return queue_.empty(); }
  PlannedStep pop();
  // After the balancer changed the split: a job of CPU ranks requests the queued steps again with it.
  void replan();

 private:
  std::vector<int64_t> split_for(int64_t batch) const;
  const TrainConfig& cfg_;
  Setup& s_;
  int rank_;
  bool keep_indices_;
  bool any_gpu_;        // some rank trains on a GPU (the same on every rank)
  int64_t min_share_;   // 2 for models with batch norm (running statistics), else 1
  int64_t next_step_;   // the next step to request
  std::deque<PlannedStep> queue_;
};

}  // namespace hetrain::train
