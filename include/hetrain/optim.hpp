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

// PyTorch's SGD: g ← grad + wd·p;  v ← μ·v + g;  step = nesterov ? g + μ·v : v;  p ← p − lr·step
// On the device of the parameters (ops::sgd_update: a loop on the CPU, one fused kernel on the GPU).
class Sgd {
 public:
  Sgd(const nn::ParamBuffer& params, const SgdConfig& config);
  void step(nn::ParamBuffer& params, float lr);
  Tensor& momentum_buffer() { return velocity_; }  // flat, like the parameters (checkpointed)
  const SgdConfig& config() const { return config_; }

 private:
  SgdConfig config_;
  Tensor velocity_;    // on the parameters' device (moved at the first step there)
  Tensor decay_mask_;  // per parameter element: weight decay factor (0 or wd); follows the parameters' device
};

struct ScheduleConfig {
  float base_lr = 0.1f;
  bool linear_scaling = false;   // lr = base_lr × global_batch / 256
  int64_t warmup_steps = 0;      // linear warm-up from 0 to the peak lr
  std::string decay = "cosine";  // cosine | step | constant
  std::vector<int64_t> milestones;  // step decay: multiply by gamma at each of these steps
  float gamma = 0.1f;
};

class LrSchedule {
 public:
  LrSchedule(const ScheduleConfig& config, int64_t global_batch, int64_t total_steps);
  float peak_lr() const { return peak_lr_; }
  float at(int64_t step) const;  // step counts from 0
  const ScheduleConfig& config() const { return config_; }
  int64_t total_steps() const { return total_steps_; }

 private:
  ScheduleConfig config_;
  float peak_lr_;
  int64_t total_steps_;
};

}  // namespace hetrain::optim
