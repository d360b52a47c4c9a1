// ops/scale/scale_cuda.cu — the scale's CUDA slot: cuda::scale (kernels/elementwise.cu), default stream.
#include "hetrain/cuda.hpp"
#include "ops/scale/scale.hpp"

namespace hetrain::ops {
namespace {
void scale_cuda(float* x, float a, int64_t n) { cuda::scale(x, a, n, nullptr); }
}  // namespace
HT_OP_IMPLEMENTATION(scale_impl, Device::CUDA, scale_cuda);
}  // namespace hetrain::ops
