// ops/sgd — PyTorch's SGD update on the flat parameter buffer, on any device:
//   g ← grad + decay[i]·p;  v ← μ·v + g;  step = nesterov ? g + μ·v : v;  p ← p − lr_i·step
// decay holds each element's weight-decay factor (wd, or 0 for exempt parameters). lr_i is h.lr, or
// h.group_lr for the elements an optional lr_group mask marks (non-zero): YOLOv5's warm-up gives its bias
// group another rate than the weights (docs/detection.md, "Training recipe"). CPU: plain loops here
// (no vector clones and no FMA: every rank, CPU or GPU, must round the update alike — docs/cpu-performance.md);
// CUDA: one fused kernel (kernels/sgd.cu).
#pragma once

#include "ops/dispatch.hpp"

namespace hetrain::ops {

struct SgdHyper {
  float lr = 0.1f;
  float momentum = 0.9f;
  bool nesterov = false;
  float group_lr = 0.0f;  // the rate of the elements lr_group marks
};
// params, velocity, grads, decay and lr_group (when given) are 1-D of the same length on one device.
void sgd_update(const Tensor& params, const Tensor& velocity, const Tensor& grads, const Tensor& decay,
                const SgdHyper& h, const Tensor* lr_group = nullptr);

using SgdUpdateFn = void(float* p, float* v, const float* g, const float* decay, const float* lr_group, int64_t n,
                         const SgdHyper& h);
extern Dispatch<SgdUpdateFn> sgd_update_impl;

}  // namespace hetrain::ops
