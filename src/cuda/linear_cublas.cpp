// src/cuda/linear_cublas.cpp — the dense layer through cuBLAS, row-major as cpu::linear_*.
//
// cuBLAS is column-major: a row-major [R, C] matrix is its column-major transpose [C, R] with leading
// dimension C. So, in column-major terms,
//   outᵀ [O, N]  = W [O, I] · inᵀ [I, N]      → gemm(T, N, m=O, n=N, k=I, W (ld I), in (ld I), out (ld O))
//   dinᵀ [I, N]  = Wᵀ [I, O] · doutᵀ [O, N]   → gemm(N, N, m=I, n=N, k=O, W (ld I), dout (ld O), din (ld I))
//   dWᵀ [I, O] += inᵀ [I, N] · dout [N, O]    → gemm(N, T, m=I, n=O, k=N, in (ld I), dout (ld O), dW (ld I))
// cublasGemmEx's compute type selects FP32 or TF32 per call, leaving the shared handle's math mode alone.
#include "cuda/bias_kernels.hpp"
#include "cuda/check.cuh"
#include "cuda/handles.hpp"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
void check_sizes(int N, int I, int O, const char* who) {
  HT_CHECK(N >= 0 && I > 0 && O > 0, who, ": bad sizes N=", N, " I=", I, " O=", O);
}

void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float* A, int lda,
          const float* B, int ldb, float beta, float* C, int ldc, bool allow_tf32) {
  const float alpha = 1.0f;
  const cublasComputeType_t compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  HT_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C,
                               CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int N, int I, int O,
                    CudaStream stream, bool allow_tf32) {
  check_sizes(N, I, O, "cuda::linear_forward");
  if (N == 0) return;
  HT_CHECK(out && in && weight, "cuda::linear_forward: null pointer");
  float beta = 0.0f;
  if (bias) {
    detail::bias_broadcast(out, bias, N, O, stream);  // same stream: ordered before the GEMM
    beta = 1.0f;
  }
  gemm(detail::cublas_on(stream), CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, weight, I, in, I, beta, out, O, allow_tf32);
}

void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int N, int I, int O, CudaStream stream, bool allow_tf32) {
  check_sizes(N, I, O, "cuda::linear_backward");
  if (N == 0) return;  // parameter gradients left as they are
  HT_CHECK(dout && in && weight, "cuda::linear_backward: null pointer");
  cublasHandle_t h = detail::cublas_on(stream);
  if (din) gemm(h, CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, weight, I, dout, O, 0.0f, din, I, allow_tf32);
  if (dweight) gemm(h, CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, in, I, dout, O, 1.0f, dweight, I, allow_tf32);
  if (dbias) detail::bias_grad_accumulate(dbias, dout, N, O, stream);
}

}  // namespace hetrain::cuda
