// src/cuda/bias.cu — bias broadcast and bias gradient for the cuBLAS dense layer (src/cuda/linear_cublas.cpp).
// CPU twin: the bias parts of ops::cpu::linear_forward / linear_backward.
#include <cstdint>

#include "cuda/bias_kernels.hpp"
#include "cuda/check.cuh"
#include "cuda/launch.cuh"

namespace hetrain::cuda::detail {
namespace {
__global__ void bias_broadcast_kernel(float* out, const float* bias, int64_t total, int O) {
  HT_GRID_STRIDE(i, total)
    out[i] = bias[i % O];
}

// Adjacent threads read adjacent columns of a row: coalesced. The N-term sum runs in row order, in float
// (N is a batch: hundreds of rows).
__global__ void bias_grad_kernel(float* dbias, const float* dout, int N, int O) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= O) return;
  float s = 0.0f;
  for (int n = 0; n < N; ++n) s += dout[int64_t(n) * O + o];
  dbias[o] += s;
}
}  // namespace

void bias_broadcast(float* out, const float* bias, int N, int O, CudaStream stream) {
  const int64_t total = int64_t(N) * O;
  if (total == 0) return;
  bias_broadcast_kernel<<<grid_for(total), kBlock, 0, stream>>>(out, bias, total, O);
  HT_CUDA_CHECK_LAUNCH("bias_broadcast");
}

void bias_grad_accumulate(float* dbias, const float* dout, int N, int O, CudaStream stream) {
  if (N == 0 || O == 0) return;
  bias_grad_kernel<<<HT_CEIL_DIV(O, kBlock), kBlock, 0, stream>>>(dbias, dout, N, O);
  HT_CUDA_CHECK_LAUNCH("bias_grad_accumulate");
}

}  // namespace hetrain::cuda::detail
