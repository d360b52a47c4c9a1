// When and how a training run writes its checkpoints (docs/checkpoint-format.md): every N steps, every M
// minutes, on a stop signal and at the end of training. Rank 0 writes; every rank learns whether it
// worked, so a full disk is one clear error everywhere, the earlier checkpoints stay, and no rank hangs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/train.hpp"
#include "train/checkpoint.hpp"

namespace hetrain::train {

class Checkpointer {
 public:
  // prunable: rank 0's earlier checkpoints of the run this one continues (Setup::prunable_checkpoints).
  // Pruning keeps the newest --keep-checkpoints of those and of the ones this run writes, and touches no
  // other file in the folder.
  Checkpointer(const TrainConfig& cfg, const dist::World& world, std::vector<std::string> prunable = {});
  bool enabled() const { return !dir_.empty(); }
  // Same answer on every rank.
  bool due_by_steps(int64_t steps_done) const;
  // Rank 0's clock only: the trainer agrees on it in the step's agreement.
  bool due_by_time() const;
  // Collective. Rank 0 writes checkpoint `info.global_step` and prunes old ones while the others wait in
  // `meet` (at `step`), which names a rank that does not come (rank 0 stalled in the write, or another one
  // stopped); every rank throws AgreedError when the write failed. Returns the path written. `ema`: the
  // run's moving average of the weights, written beside the model (null: none). `powersgd`: the run's
  // compression state; its error feedback is first summed over the ranks (a collective of every rank).
  std::string write(const CheckpointInfo& info, const nn::ParamBuffer& params, optim::Sgd& sgd,
                    dist::StepArrival& meet, int64_t step, optim::WeightAverage* ema = nullptr,
                    const dist::PowerSgd* powersgd = nullptr);
  // Rank 0 alone, while the other ranks train on (the asynchronous modes' mid-run checkpoints of the
  // center): writes `tensors` as checkpoint `info.global_step` and prunes old ones. A failure throws on
  // rank 0 only, which ends the job (earlier checkpoints stay intact).
  std::string write_alone(const CheckpointInfo& info, const nn::ParamBuffer& layout, const CheckpointTensors& tensors);
  int64_t last_step() const { return last_step_; }
  double seconds_spent() const { return seconds_; }

 private:
  void write_file(const std::string& path, const CheckpointInfo& info, const nn::ParamBuffer& layout,
                  const CheckpointTensors& tensors);
  void written(const std::string& path, int64_t step, std::chrono::steady_clock::time_point start);
  const dist::World& world_;
  std::string dir_;
  int64_t every_;
  double minutes_;
  int keep_;
  bool quiet_;
  std::vector<std::string> prunable_;  // rank 0
  std::vector<std::string> removed_;   // rank 0: pruned by the newest write, for its log line
  bool warned_slow_ = false;           // rank 0: said once that a SIGTERM to mpirun would lose a checkpoint
  std::chrono::steady_clock::time_point last_time_;
  int64_t last_step_ = -1;
  double seconds_ = 0;
};

}  // namespace hetrain::train
