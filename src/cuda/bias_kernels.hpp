// src/cuda/bias_kernels.hpp — the bias helpers of the cuBLAS dense layer (src/cuda/bias.cu; private).
#pragma once

#include "hetrain/cuda.hpp"

namespace hetrain::cuda::detail {
// out [N, O] = bias [O] broadcast over rows (before a GEMM that adds with beta = 1).
void bias_broadcast(float* out, const float* bias, int N, int O, CudaStream stream);
// dbias [O] += Σ_n dout [N, O] (column sums; each thread owns one column, summing rows in order).
void bias_grad_accumulate(float* dbias, const float* dout, int N, int O, CudaStream stream);
}  // namespace hetrain::cuda::detail
