// kernels/sgd.cu — the SGD update's CUDA side (ops/sgd): one fused kernel for gradient scale, weight decay
// (masked), momentum and Nesterov — one pass over the flat buffers instead of four — and the op's CUDA slot.
// CPU twins: src/ops/sgd/sgd.cpp, and sgd_update_twin in test/gpu/twins.cpp.
#include <cstdint>

#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/sgd/sgd.hpp"

namespace hetrain::cuda {
namespace {

// Every multiply and add is rounded on its own (__fmul_rn/__fadd_rn are never fused into FMAs), in the
// order optim::Sgd's CPU loop uses: a CPU rank and a GPU rank of a mixed job apply the same reduced
// gradient and must keep bit-identical parameters (invariant 3). The CPU build targets x86-64-v2, which
// has no FMA, so its loop is not contracted either.
template <bool kMomentum, bool kNesterov>
__global__ void sgd_update_kernel(float* param, float* velocity, const float* grad, const float* decay_mask,
                                  const float* lr_group, int64_t n, float lr, float group_lr, float momentum,
                                  float weight_decay, float grad_scale) {
  HT_GRID_STRIDE(i, n) {
    const float rate = lr_group && lr_group[i] != 0.0f ? group_lr : lr;  // a select, as on the CPU
    const float p = param[i];
    const float wd = decay_mask ? __fmul_rn(weight_decay, decay_mask[i]) : weight_decay;
    const float scaled = __fmul_rn(grad_scale, grad[i]);
    // No decay term where the decay is 0 (PyTorch adds none: 0·inf would make an infinite parameter NaN).
    const float g = wd != 0.0f ? __fadd_rn(scaled, __fmul_rn(wd, p)) : scaled;
    float step = g;
    if (kMomentum) {
      const float v = __fadd_rn(__fmul_rn(momentum, velocity[i]), g);
      velocity[i] = v;
      step = kNesterov ? __fadd_rn(g, __fmul_rn(momentum, v)) : v;
    }
    param[i] = __fsub_rn(p, __fmul_rn(rate, step));
  }
}
}  // namespace

void sgd_update(float* param, float* velocity, const float* grad, const float* decay_mask, const float* lr_group,
                int64_t n, const SgdStep& s, CudaStream stream) {
  HT_CHECK(n >= 0, "sgd_update: negative size ", n);
  HT_CHECK(s.momentum >= 0.0f, "sgd_update: momentum must be >= 0, got ", s.momentum);
  HT_CHECK(!s.nesterov || s.momentum > 0.0f, "sgd_update: Nesterov needs momentum > 0");
  if (n == 0) return;
  HT_CHECK(param && grad, "sgd_update: null parameter or gradient buffer");
  HT_CHECK(s.momentum == 0.0f || velocity, "sgd_update: momentum ", s.momentum, " needs a velocity buffer");
  int64_t g64 = HT_CEIL_DIV(n, int64_t(kBlock));
  const int grid = int(g64 < 65536 ? g64 : 65536);
  if (s.momentum == 0.0f)
    sgd_update_kernel<false, false><<<grid, kBlock, 0, stream>>>(param, velocity, grad, decay_mask, lr_group, n, s.lr,
                                                                 s.group_lr, s.momentum, s.weight_decay, s.grad_scale);
  else if (s.nesterov)
    sgd_update_kernel<true, true><<<grid, kBlock, 0, stream>>>(param, velocity, grad, decay_mask, lr_group, n, s.lr,
                                                               s.group_lr, s.momentum, s.weight_decay, s.grad_scale);
  else
    sgd_update_kernel<true, false><<<grid, kBlock, 0, stream>>>(param, velocity, grad, decay_mask, lr_group, n, s.lr,
                                                                s.group_lr, s.momentum, s.weight_decay, s.grad_scale);
  HT_CUDA_CHECK_LAUNCH("sgd_update");
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
namespace {
void sgd_update_cuda(float* p, float* v, const float* g, const float* decay, const float* lr_group, int64_t n,
                     const SgdHyper& h) {
  cuda::SgdStep s;
  s.lr = h.lr;
  s.group_lr = h.group_lr;
  s.momentum = h.momentum;
  s.nesterov = h.nesterov;
  s.weight_decay = 1.0f;  // the mask holds each element's factor (wd or 0)
  s.grad_scale = 1.0f;    // the reduction already weighted the gradients
  cuda::sgd_update(p, v, g, decay, lr_group, n, s, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(sgd_update_impl, Device::CUDA, sgd_update_cuda);
}  // namespace hetrain::ops
