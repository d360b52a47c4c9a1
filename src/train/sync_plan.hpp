// The synchronous mode's sample choice (docs/architecture.md, "Training loop"): step s of an epoch owns
// perm[s·B, (s+1)·B), rank r takes [o_r, o_r + b_r) of it with the split in force when the step was
// requested; batches are requested --prefetch steps ahead, so reading overlaps training.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/train.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

// The work of one step as planned when its batch was requested: later rebalances do not change it.
struct PlannedStep {
  int64_t epoch = 0, step_in_epoch = 0, global_step = 0;
  int64_t global_batch = 0;      // B of this step (smaller for a partial last batch)
  std::vector<int64_t> split;    // b_r of every rank, Σ = global_batch
  std::vector<int64_t> indices;  // this rank's samples (kept for --dump-samples, logged when trained on)
  int rank = 0;                  // this rank
  int64_t local_batch() const { return split[size_t(rank)]; }
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
