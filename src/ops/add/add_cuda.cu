// ops/add/add_cuda.cu — the element-wise sums' CUDA slots (kernels/elementwise.cu, cuDNN ReLU), default stream.
#include "hetrain/cuda.hpp"
#include "ops/add/add.hpp"

namespace hetrain::ops {
namespace {
void add_cuda(float* y, const float* a, const float* b, int64_t n) { cuda::add_forward(y, a, b, n, nullptr); }
void accumulate_cuda(float* acc, const float* x, int64_t n) { cuda::accumulate(acc, x, n, nullptr); }
// Two launches, the second in place.
void add_relu_cuda(float* y, const float* a, const float* b, int64_t n) {
  cuda::add_forward(y, a, b, n, nullptr);
  cuda::relu_forward(y, y, n, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(add_impl, Device::CUDA, add_cuda);
HT_OP_IMPLEMENTATION(accumulate_impl, Device::CUDA, accumulate_cuda);
HT_OP_IMPLEMENTATION(add_relu_impl, Device::CUDA, add_relu_cuda);
}  // namespace hetrain::ops
