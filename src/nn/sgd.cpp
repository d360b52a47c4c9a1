// nn/sgd.cpp — PyTorch's SGD (momentum, Nesterov, coupled weight decay) on the flat buffers, over
// ops::sgd_update (any device).
#include "hetrain/error.hpp"
#include "hetrain/optim.hpp"
#include "ops/sgd/sgd.hpp"

namespace hetrain::optim {
namespace {
// 1 for every element of a Bias or BnBias parameter (YOLOv5's group 0), else 0; on the host.
Tensor bias_group_mask(const nn::ParamBuffer& params) {
  Tensor mask({params.count()});
  mask.zero();
  for (const nn::ParamSpec& s : params.specs())
    if (s.kind == nn::ParamKind::Bias || s.kind == nn::ParamKind::BnBias)
      for (int64_t j = 0; j < s.numel(); ++j) mask[s.offset + j] = 1.0f;
  return mask;
}
}  // namespace

Sgd::Sgd(const nn::ParamBuffer& params, const SgdConfig& config) : config_(config) {
  HT_CHECK(params.finalized(), "sgd: parameter buffer not finalized");
  HT_CHECK(config.momentum >= 0.0f, "sgd: momentum must be >= 0, got ", config.momentum);
  HT_CHECK(config.weight_decay >= 0.0f, "sgd: weight decay must be >= 0, got ", config.weight_decay);
  HT_CHECK(!config.nesterov || config.momentum > 0.0f, "sgd: nesterov needs momentum > 0");
  velocity_ = Tensor({params.count()});
  decay_mask_ = Tensor({params.count()});
  decay_mask_.fill(config.weight_decay);
  if (!config.decay_bn_and_bias) {
    for (const nn::ParamSpec& s : params.specs()) {
      const bool exempt =
          s.kind == nn::ParamKind::Bias || s.kind == nn::ParamKind::BnWeight || s.kind == nn::ParamKind::BnBias;
      if (exempt)
        for (int64_t j = 0; j < s.numel(); ++j) decay_mask_[s.offset + j] = 0.0f;
    }
  }
}

void Sgd::step(nn::ParamBuffer& params, float lr) {
  StepRates rates;
  rates.lr = rates.bias_lr = lr;
  rates.momentum = config_.momentum;
  step(params, rates);
}

void Sgd::step(nn::ParamBuffer& params, const StepRates& rates) {
  HT_CHECK(params.count() == velocity_.numel(), "sgd: parameter buffer has ", params.count(),
           " values, the optimizer was built for ", velocity_.numel());
  const Device device = params.device();
  if (velocity_.device() != device) velocity_ = velocity_.to(device);  // moved at the first step there
  if (decay_mask_.device() != device) decay_mask_ = decay_mask_.to(device);
  HT_CHECK(rates.momentum >= 0.0f && (!config_.nesterov || rates.momentum > 0.0f), "sgd: momentum ", rates.momentum,
           " out of range", config_.nesterov ? " for Nesterov (> 0)" : " (>= 0)");
  ops::SgdHyper h;
  h.lr = rates.lr;
  h.group_lr = rates.bias_lr;
  h.momentum = rates.momentum;
  h.nesterov = config_.nesterov;
  // The bias group's mask is read only while its rate differs (YOLOv5's warm-up).
  const bool grouped = rates.bias_lr != rates.lr;
  if (grouped && !bias_group_.defined()) bias_group_ = bias_group_mask(params).to(device);  // first such step
  if (grouped && bias_group_.device() != device) bias_group_ = bias_group_.to(device);
  ops::sgd_update(params.values(), velocity_, params.grads(), decay_mask_, h, grouped ? &bias_group_ : nullptr);
}

}  // namespace hetrain::optim
