// ops/silu/silu_cuda.cu — the CUDA twins of ops/silu/silu.cpp (grid-stride loops, legacy default stream).
#include "cuda/check.cuh"
#include "ops/grid_stride.cuh"
#include "ops/silu/silu.hpp"

namespace hetrain::ops {
namespace {
using cuda_grid::grid_for;
using cuda_grid::kBlock;

__device__ inline float logistic(float x) { return 1.f / (1.f + expf(-x)); }

__global__ void silu_kernel(float* y, const float* x, int64_t n) {
  HT_GRID_STRIDE(i, n) y[i] = x[i] * logistic(x[i]);
}
__global__ void silu_backward_kernel(float* dx, const float* dy, const float* x, int64_t n) {
  HT_GRID_STRIDE(i, n) {
    const float s = logistic(x[i]);
    dx[i] = dy[i] * s * (1.f + x[i] * (1.f - s));
  }
}
__global__ void sigmoid_kernel(float* y, const float* x, int64_t n) {
  HT_GRID_STRIDE(i, n) y[i] = logistic(x[i]);
}
__global__ void sigmoid_backward_kernel(float* dx, const float* dy, const float* y, int64_t n) {
  HT_GRID_STRIDE(i, n) dx[i] = dy[i] * y[i] * (1.f - y[i]);
}

void silu_forward_cuda(float* y, const float* x, int64_t n) {
  if (n == 0) return;
  silu_kernel<<<grid_for(n), kBlock>>>(y, x, n);
  HT_CUDA_CHECK_LAUNCH("silu_forward");
}
void silu_backward_cuda(float* dx, const float* dy, const float* x, int64_t n) {
  if (n == 0) return;
  silu_backward_kernel<<<grid_for(n), kBlock>>>(dx, dy, x, n);
  HT_CUDA_CHECK_LAUNCH("silu_backward");
}
void sigmoid_forward_cuda(float* y, const float* x, int64_t n) {
  if (n == 0) return;
  sigmoid_kernel<<<grid_for(n), kBlock>>>(y, x, n);
  HT_CUDA_CHECK_LAUNCH("sigmoid_forward");
}
void sigmoid_backward_cuda(float* dx, const float* dy, const float* y, int64_t n) {
  if (n == 0) return;
  sigmoid_backward_kernel<<<grid_for(n), kBlock>>>(dx, dy, y, n);
  HT_CUDA_CHECK_LAUNCH("sigmoid_backward");
}
}  // namespace

HT_OP_IMPLEMENTATION(silu_forward_impl, Device::CUDA, silu_forward_cuda);
HT_OP_IMPLEMENTATION(silu_backward_impl, Device::CUDA, silu_backward_cuda);
HT_OP_IMPLEMENTATION(sigmoid_forward_impl, Device::CUDA, sigmoid_forward_cuda);
HT_OP_IMPLEMENTATION(sigmoid_backward_impl, Device::CUDA, sigmoid_backward_cuda);

}  // namespace hetrain::ops
