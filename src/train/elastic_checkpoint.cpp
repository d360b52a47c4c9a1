#include "train/elastic_checkpoint.hpp"

#include <algorithm>

#include "train/checkpoint.hpp"

namespace hetrain::train {

void CenterCheckpoints::maybe_write(int64_t position, dist::ElasticCenter& center, dist::SampleCounter& counter,
                                    const std::vector<int64_t>& split) {
  if (!checkpointer_.enabled()) return;
  const int64_t B = cfg_.step_batch(), every = cfg_.checkpoint_every;  // steps of --global-batch x --accumulate
  const bool by_steps = every > 0 && (position / B) / every > last_step_ / every;
  if (!by_steps && !checkpointer_.due_by_time()) return;
  const int64_t settled = counter.settled_position();
  if (settled < 0) return;  // a leader is claiming: at the next local step
  const int64_t step = std::min(settled, total_samples_) / B;
  if (step <= last_step_ || (!checkpointer_.due_by_time() && step / every <= last_step_ / every)) return;
  nn::ParamBuffer& params = s_.model->params();
  CheckpointTensors t;
  t.values.resize(size_t(params.count()));
  center.read(t.values.data());
  const Tensor states = params.states().to(Device::CPU), momentum = s_.sgd->momentum_buffer().to(Device::CPU);
  t.states.assign(states.data(), states.data() + states.numel());
  t.momentum.assign(momentum.data(), momentum.data() + momentum.numel());
  t.num_batches_tracked = step;
  if (s_.ema) {  // rank 0's average of the center (train/elastic_mode.cpp), with the model's statistics
    const Tensor average = s_.ema->values().to(Device::CPU);
    t.ema_values.assign(average.data(), average.data() + average.numel());
    t.ema_states = t.states;
    t.ema_updates = s_.ema->updates();
  }
  CheckpointInfo info = checkpoint_info(cfg_, s_, step, int(split.size()));
  info.sample_position = std::min(settled, total_samples_);
  info.split = split;
  checkpointer_.write_alone(info, params, t);
  last_step_ = step;
}

}  // namespace hetrain::train
