// nn/sgd.cpp — PyTorch's SGD (momentum, Nesterov, coupled weight decay) on the flat buffers.
#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/optim.hpp"

namespace hetrain::optim {

Sgd::Sgd(const nn::ParamBuffer& params, const SgdConfig& config) : config_(config) {
  HT_CHECK(params.finalized(), "sgd: parameter buffer not finalized");
  HT_CHECK(config.momentum >= 0.0f, "sgd: momentum must be >= 0, got ", config.momentum);
  HT_CHECK(config.weight_decay >= 0.0f, "sgd: weight decay must be >= 0, got ", config.weight_decay);
  HT_CHECK(!config.nesterov || config.momentum > 0.0f, "sgd: nesterov needs momentum > 0");
  velocity_ = Tensor({params.count()});
  decay_mask_.assign(static_cast<size_t>(params.count()), config.weight_decay);
  if (!config.decay_bn_and_bias) {
    for (const nn::ParamSpec& s : params.specs()) {
      const bool exempt =
          s.kind == nn::ParamKind::Bias || s.kind == nn::ParamKind::BnWeight || s.kind == nn::ParamKind::BnBias;
      if (exempt)
        for (int64_t j = 0; j < s.numel(); ++j) decay_mask_[static_cast<size_t>(s.offset + j)] = 0.0f;
    }
  }
}

void Sgd::step(nn::ParamBuffer& params, float lr) {
  HT_CHECK(params.count() == velocity_.numel(), "sgd: parameter buffer has ", params.count(),
           " values, the optimizer was built for ", velocity_.numel());
  if (params.device() == Device::CUDA) return step_on_gpu(params, lr);
  float* p = params.values().data();
  const float* g = params.grads().data();
  float* v = velocity_.data();
  const float* wd = decay_mask_.data();
  const float mu = config_.momentum;
  const int64_t n = params.count();
  // PyTorch initialises the buffer with the first gradient; with dampening 0 that equals μ·0 + g, so a
  // zero-initialised buffer gives the same numbers.
  if (mu == 0.0f) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd[i] * p[i]);
  } else if (config_.nesterov) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const float d = g[i] + wd[i] * p[i];
      v[i] = mu * v[i] + d;
      p[i] -= lr * (d + mu * v[i]);
    }
  } else {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + (g[i] + wd[i] * p[i]);
      p[i] -= lr * v[i];
    }
  }
}

void Sgd::step_on_gpu(nn::ParamBuffer& params, float lr) {
  if (velocity_.device() != Device::CUDA) velocity_ = velocity_.to(Device::CUDA);
  if (!decay_mask_device_.defined()) {
    Tensor host = Tensor::view_of(decay_mask_.data(), {int64_t(decay_mask_.size())});
    decay_mask_device_ = host.to(Device::CUDA);
  }
  cuda::SgdStep s;
  s.lr = lr;
  s.momentum = config_.momentum;
  s.nesterov = config_.nesterov;
  s.weight_decay = 1.0f;  // the mask holds each element's factor (wd or 0)
  s.grad_scale = 1.0f;    // the reduction already weighted the gradients
  cuda::sgd_update(params.values().data(), velocity_.data(), params.grads().data(), decay_mask_device_.data(),
                   params.count(), s, nullptr);
}

}  // namespace hetrain::optim
