// ops/sgd/sgd_cuda.cu — the SGD update's CUDA slot: kernels/sgd_update.cu, default stream.
#include "hetrain/cuda.hpp"
#include "ops/sgd/sgd.hpp"

namespace hetrain::ops {
namespace {
void sgd_update_cuda(float* p, float* v, const float* g, const float* decay, int64_t n, const SgdHyper& h) {
  cuda::SgdStep s;
  s.lr = h.lr;
  s.momentum = h.momentum;
  s.nesterov = h.nesterov;
  s.weight_decay = 1.0f;  // the mask holds each element's factor (wd or 0)
  s.grad_scale = 1.0f;    // the reduction already weighted the gradients
  cuda::sgd_update(p, v, g, decay, n, s, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(sgd_update_impl, Device::CUDA, sgd_update_cuda);
}  // namespace hetrain::ops
