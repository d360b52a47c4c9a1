// ops/sgd/sgd.cpp — the SGD update's entry point and CPU loops.
#include "ops/sgd/sgd.hpp"

namespace hetrain::ops {

Dispatch<SgdUpdateFn> sgd_update_impl("sgd_update");

namespace {
// PyTorch initialises the momentum buffer with the first gradient; with dampening 0 that equals μ·0 + g, so
// a zero-initialised buffer gives the same numbers.
void sgd_update_cpu(float* p, float* v, const float* g, const float* wd, int64_t n, const SgdHyper& h) {
  const float lr = h.lr, mu = h.momentum;
  if (mu == 0.0f) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + wd[i] * p[i]);
  } else if (h.nesterov) {
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
}  // namespace

HT_OP_IMPLEMENTATION(sgd_update_impl, Device::CPU, sgd_update_cpu);

void sgd_update(const Tensor& params, const Tensor& velocity, const Tensor& grads, const Tensor& decay,
                const SgdHyper& h) {
  HT_CHECK(params.ndim() == 1, "sgd_update: expected flat parameters, got ", shape_str(params.shape()));
  check_shape("sgd_update", "momentum buffer", velocity, params.shape());
  check_shape("sgd_update", "gradients", grads, params.shape());
  check_shape("sgd_update", "weight-decay mask", decay, params.shape());
  const Device d = common_device("sgd_update", {&params, &velocity, &grads, &decay});
  sgd_update_impl.on(d)(params.data(), velocity.data(), grads.data(), decay.data(), params.numel(), h);
}

}  // namespace hetrain::ops
