// The asynchronous modes' mid-run checkpoints (docs/checkpoint-format.md): rank 0 alone, while the other
// ranks train on, writes the center every --checkpoint-every global steps of samples and every
// --checkpoint-minutes. The final checkpoint is collective, like every mode's (train/loop.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/train.hpp"
#include "train/checkpointer.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

class CenterCheckpoints {
 public:
  CenterCheckpoints(const TrainConfig& cfg, Setup& s, Checkpointer& checkpointer, int64_t total_samples)
      : cfg_(cfg), s_(s), checkpointer_(checkpointer), total_samples_(total_samples), last_step_(s.start_step) {}

  // Rank 0, after a local step that ended at sample `position`: a checkpoint of the center when one is
  // due. It is written at the settled position (every claim before it is in the center: a resume loses no
  // sample and trains the claims past it again), with rank 0's optimizer momentum and batch-norm statistics
  // (the end of the run averages the latter). `split`: every rank's local batch.
  void maybe_write(int64_t position, dist::ElasticCenter& center, dist::SampleCounter& counter,
                   const std::vector<int64_t>& split);

 private:
  const TrainConfig& cfg_;
  Setup& s_;
  Checkpointer& checkpointer_;
  int64_t total_samples_;
  int64_t last_step_;  // the step of the newest checkpoint
};

}  // namespace hetrain::train
