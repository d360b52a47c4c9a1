// hetrain/optim.hpp — SGD with momentum and the learning-rate schedule.
//
// The optimizer works on the flat parameter and gradient buffers, so every rank applies the identical
// update after the reduction and the replicas stay identical.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/nn.hpp"

namespace hetrain::optim {

struct SgdConfig {
  float momentum = 0.9f;
  bool nesterov = false;
  float weight_decay = 5e-4f;
  bool decay_bn_and_bias = true;  // false: no weight decay on BN parameters and biases
};

// One update's rates. Outside a YOLOv5-style warm-up (ScheduleConfig) bias_lr equals lr and momentum is
// the optimizer's.
struct StepRates {
  float lr = 0.1f;
  float bias_lr = 0.1f;   // the bias group's: every parameter of kind Bias or BnBias (YOLOv5's group 0)
  float momentum = 0.9f;
};

// PyTorch's SGD: g ← grad + wd·p;  v ← μ·v + g;  step = nesterov ? g + μ·v : v;  p ← p − lr·step
// On the device of the parameters (ops::sgd_update: a loop on the CPU, one fused kernel on the GPU).
class Sgd {
 public:
  Sgd(const nn::ParamBuffer& params, const SgdConfig& config);
  void step(nn::ParamBuffer& params, float lr);  // every element at lr, the configured momentum
  void step(nn::ParamBuffer& params, const StepRates& rates);
  Tensor& momentum_buffer() { return velocity_; }  // flat, like the parameters (checkpointed)
  const SgdConfig& config() const { return config_; }

 private:
  SgdConfig config_;
  Tensor velocity_;    // on the parameters' device (moved at the first step there)
  Tensor decay_mask_;  // per parameter element: weight decay factor (0 or wd); follows the parameters' device
  Tensor bias_group_;  // per element: 1 in the bias group, else 0; made at the first step that needs it
};

struct ScheduleConfig {
  float base_lr = 0.1f;
  bool linear_scaling = false;   // lr = base_lr × global_batch / 256
  int64_t warmup_steps = 0;      // linear warm-up from 0 to the peak lr
  // YOLOv5's warm-up (docs/detection.md, "Training recipe"): over the warm-up the bias group's rate falls
  // from lr + warmup_bias_lr to lr (0: the biases warm up like the weights), and the momentum rises from
  // warmup_momentum to the optimizer's (< 0: constant).
  float warmup_bias_lr = 0.0f;
  float warmup_momentum = -1.0f;
  std::string decay = "cosine";  // cosine | step | constant
  std::vector<int64_t> milestones;  // step decay: multiply by gamma at each of these steps
  float gamma = 0.1f;
};

class LrSchedule {
 public:
  LrSchedule(const ScheduleConfig& config, int64_t global_batch, int64_t total_steps);
  float peak_lr() const { return peak_lr_; }
  float at(int64_t step) const;  // step counts from 0
  // Step `step`'s rates for an optimizer whose momentum is `momentum`: lr = at(step), and the warm-up's bias
  // rate and momentum.
  StepRates rates(int64_t step, float momentum) const;
  const ScheduleConfig& config() const { return config_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  ScheduleConfig config_;
  float peak_lr_;
  int64_t total_steps_;
};

// YOLOv5's exponential moving average of the weights (its ModelEMA; docs/detection.md, "Weight average"):
// after each update avg ← d·avg + (1 − d)·model over the parameters and the batch-norm running statistics,
// d = decay·(1 − exp(−updates / ramp)), so that the young average follows the model closely. Validation,
// checkpoints' evaluation and export use the average; training never reads it.
class WeightAverage {
 public:
  // Starts as a copy of the model's values and statistics, with no update counted.
  WeightAverage(const nn::ParamBuffer& params, float decay, float ramp);
  // After an update of `params`: counts it, then steps the average (on the parameters' device).
  void update(const nn::ParamBuffer& params);
  // `times` updates towards the same values (float [values().numel()], on any device) at once, as
  // avg ← p·avg + (1 − p)·values with p the product of their decays; the statistics stay as they are
  // (the asynchronous modes' average of the elastic center, docs/detection.md "Training recipe").
  void update_towards(const Tensor& values, int64_t times);
  // Exchanges the contents of the average and the model (its values and statistics); twice restores both.
  void exchange(nn::ParamBuffer& params);
  float decay_at(int64_t updates) const;  // d after `updates` updates
  int64_t updates() const { return updates_; }
  void set_updates(int64_t updates) { updates_ = updates; }  // from a checkpoint
  Tensor& values() { return values_; }  // [params.count()], on the parameters' device once updated
  Tensor& states() { return states_; }  // [params.state_count()]
  float decay() const { return decay_; }

 private:
  float decay_, ramp_;
  int64_t updates_ = 0;
  Tensor values_, states_;
};

// Swaps the average into the model for its lifetime (validation with the average), back on destruction.
class AverageSwappedIn {
 public:
  AverageSwappedIn(WeightAverage& average, nn::ParamBuffer& params);
  ~AverageSwappedIn();
  AverageSwappedIn(const AverageSwappedIn&) = delete;
  AverageSwappedIn& operator=(const AverageSwappedIn&) = delete;

 private:
  WeightAverage& average_;
  nn::ParamBuffer& params_;
};

}  // namespace hetrain::optim
