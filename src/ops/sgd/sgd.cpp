// ops/sgd/sgd.cpp — the SGD update's entry point and CPU loops.
#include "ops/sgd/sgd.hpp"
#include "hetrain/op_profile.hpp"

namespace hetrain::ops {

Dispatch<SgdUpdateFn> sgd_update_impl("sgd_update");

namespace {
// PyTorch initialises the momentum buffer with the first gradient; with dampening 0 that equals μ·0 + g, so
// a zero-initialised buffer gives the same numbers. `Rate` gives element i's learning rate: one for all, or
// the group's for the elements the mask marks (a select, so every element's rate is exactly one of the two).
// An element without weight decay gets no decay term at all, as PyTorch adds none for weight_decay 0: 0·p
// would turn an infinite parameter into NaN where PyTorch keeps it infinite.
inline float decayed(float g, float wd, float p) { return wd != 0.0f ? g + wd * p : g; }

template <typename Rate>
void sgd_loops(float* p, float* v, const float* g, const float* wd, int64_t n, const SgdHyper& h, Rate lr) {
  const float mu = h.momentum;
  if (mu == 0.0f) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) p[i] -= lr(i) * decayed(g[i], wd[i], p[i]);
  } else if (h.nesterov) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      const float d = decayed(g[i], wd[i], p[i]);
      v[i] = mu * v[i] + d;
      p[i] -= lr(i) * (d + mu * v[i]);
    }
  } else {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + decayed(g[i], wd[i], p[i]);
      p[i] -= lr(i) * v[i];
    }
  }
}

void sgd_update_cpu(float* p, float* v, const float* g, const float* wd, const float* lr_group, int64_t n,
                    const SgdHyper& h) {
  const float lr = h.lr, group_lr = h.group_lr;
  if (lr_group)
    sgd_loops(p, v, g, wd, n, h, [=](int64_t i) { return lr_group[i] != 0.0f ? group_lr : lr; });
  else
    sgd_loops(p, v, g, wd, n, h, [=](int64_t) { return lr; });
}
}  // namespace

HT_OP_IMPLEMENTATION(sgd_update_impl, Device::CPU, sgd_update_cpu);

void sgd_update(const Tensor& params, const Tensor& velocity, const Tensor& grads, const Tensor& decay,
                const SgdHyper& h, const Tensor* lr_group) {
  OpProfileScope profile("sgd_update");
  HT_CHECK(params.ndim() == 1, "sgd_update: expected flat parameters, got ", shape_str(params.shape()));
  check_shape("sgd_update", "momentum buffer", velocity, params.shape());
  check_shape("sgd_update", "gradients", grads, params.shape());
  check_shape("sgd_update", "weight-decay mask", decay, params.shape());
  if (lr_group) check_shape("sgd_update", "learning-rate group mask", *lr_group, params.shape());
  const Device d = lr_group ? common_device("sgd_update", {&params, &velocity, &grads, &decay, lr_group})
                            : common_device("sgd_update", {&params, &velocity, &grads, &decay});
  sgd_update_impl.on(d)(params.data(), velocity.data(), grads.data(), decay.data(),
                        lr_group ? lr_group->data() : nullptr, params.numel(), h);
}

}  // namespace hetrain::ops
