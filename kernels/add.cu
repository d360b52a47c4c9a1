// kernels/add.cu — the element-wise sums' kernels and CUDA slots (ops/add): residual add, gradient
// accumulation, and add-then-ReLU. CPU twins: src/ops/add/add.cpp.
#include <cstdint>

#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/add/add.hpp"

namespace hetrain::cuda {
namespace {
__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  HT_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* acc, const float* x, int64_t n) {
  HT_GRID_STRIDE(i, n) acc[i] += x[i];
}
}  // namespace

void add_forward(float* out, const float* a, const float* b, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "add_forward: negative size ", n);
  if (n == 0) return;
  HT_CHECK(out && a && b, "add_forward: null pointer");
  add_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, a, b, n);
  HT_CUDA_CHECK_LAUNCH("add_forward");
}

void accumulate(float* acc, const float* x, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "accumulate: negative size ", n);
  if (n == 0) return;
  HT_CHECK(acc && x, "accumulate: null pointer");
  accumulate_kernel<<<grid_for(n), kBlock, 0, stream>>>(acc, x, n);
  HT_CUDA_CHECK_LAUNCH("accumulate");
}

}  // namespace hetrain::cuda

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
