// src/cuda/linear_cublas.cpp — the dense layer through cuBLAS, row-major as ops::cpu::linear_*.
//
// cuBLAS is column-major: a row-major [R, C] matrix is its column-major transpose [C, R] with leading
// dimension C. So, in column-major terms,
//   outᵀ [O, N]  = W [O, I] · inᵀ [I, N]      → gemm(T, N, m=O, n=N, k=I, W (ld I), in (ld I), out (ld O))
//   dinᵀ [I, N]  = Wᵀ [I, O] · doutᵀ [O, N]   → gemm(N, N, m=I, n=N, k=O, W (ld I), dout (ld O), din (ld I))
//   dWᵀ [I, O] += inᵀ [I, N] · dout [N, O]    → gemm(N, T, m=I, n=O, k=N, in (ld I), dout (ld O), dW (ld I))
// cublasGemmEx's compute type selects FP32 or TF32 per call, leaving the shared handle's math mode alone.
//
// BF16 and FP16 (docs/precision.md): A and B are 16-bit (CUDA_R_16BF / CUDA_R_16F), C stays CUDA_R_32F and
// the compute type CUBLAS_COMPUTE_32F with float alpha and beta — one of cublasGemmEx's supported
// combinations (16-bit inputs, FP32 accumulation and output). So out, din and dweight are written in float
// directly: no output cast, and dweight accumulates in place with beta = 1 as at FP32. Only the operands are
// cast, into the device's 16-bit scratch (src/cuda/low_precision.hpp): in and weight for forward; dout, weight
// (for din) and in (for dweight) for backward. The bias and its gradient stay FP32.
#include "cuda/bias_kernels.hpp"
#include "cuda/check.cuh"
#include "cuda/handles.hpp"
#include "cuda/low_precision.hpp"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
void check_sizes(int N, int I, int O, const char* who) {
  HT_CHECK(N >= 0 && I > 0 && O > 0, who, ": bad sizes N=", N, " I=", I, " O=", O);
}

// C (float) = A·B + beta·C; A and B are float at FP32/TF32, 16-bit (already cast) at BF16/FP16.
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* A, int lda,
          const void* B, int ldb, float beta, float* C, int ldc, Precision precision) {
  const float alpha = 1.0f;
  cudaDataType_t ab = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (precision) {
    case Precision::FP32: break;
    case Precision::TF32: compute = CUBLAS_COMPUTE_32F_FAST_TF32; break;
    case Precision::BF16: ab = CUDA_R_16BF; break;
    case Precision::FP16: ab = CUDA_R_16F; break;
  }
  HT_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &alpha, A, ab, lda, B, ab, ldb, &beta, C, CUDA_R_32F, ldc, compute,
                               CUBLAS_GEMM_DEFAULT));
}

// The 16-bit scratch as regions of the given element counts (0: unused), each 256-byte aligned.
struct Regions {
  char* at[3];
};
Regions scratch_regions(int64_t n0, int64_t n1, int64_t n2) {
  const size_t b0 = detail::half_region_bytes(n0), b1 = detail::half_region_bytes(n1);
  char* base = detail::low_precision_scratch(b0 + b1 + detail::half_region_bytes(n2));
  return {{base, base + b0, base + b0 + b1}};
}
}  // namespace

void linear_forward(float* out, const float* in, const float* weight, const float* bias, int N, int I, int O,
                    CudaStream stream, Precision precision) {
  check_sizes(N, I, O, "cuda::linear_forward");
  if (N == 0) return;
  HT_CHECK(out && in && weight, "cuda::linear_forward: null pointer");
  float beta = 0.0f;
  if (bias) {
    detail::bias_broadcast(out, bias, N, O, stream);  // same stream: ordered before the GEMM
    beta = 1.0f;
  }
  const void* a = in;
  const void* w = weight;
  if (is_16bit(precision)) {
    const Regions r = scratch_regions(int64_t(N) * I, int64_t(O) * I, 0);
    cast_to_16bit(r.at[0], in, int64_t(N) * I, precision, stream);
    cast_to_16bit(r.at[1], weight, int64_t(O) * I, precision, stream);
    a = r.at[0], w = r.at[1];
  }
  gemm(detail::cublas_on(stream), CUBLAS_OP_T, CUBLAS_OP_N, O, N, I, w, I, a, I, beta, out, O, precision);
}

void linear_backward(float* din, float* dweight, float* dbias, const float* dout, const float* in, const float* weight,
                     int N, int I, int O, CudaStream stream, Precision precision) {
  check_sizes(N, I, O, "cuda::linear_backward");
  if (N == 0) return;  // parameter gradients left as they are
  HT_CHECK(dout && in && weight, "cuda::linear_backward: null pointer");
  const void* d = dout;
  const void* a = in;
  const void* w = weight;
  if (is_16bit(precision) && (din || dweight)) {
    // Regions: dout16 [N, O], weight16 [O, I] (for din), in16 [N, I] (for dweight).
    const Regions r = scratch_regions(int64_t(N) * O, din ? int64_t(O) * I : 0, dweight ? int64_t(N) * I : 0);
    cast_to_16bit(r.at[0], dout, int64_t(N) * O, precision, stream);
    d = r.at[0];
    if (din) {
      cast_to_16bit(r.at[1], weight, int64_t(O) * I, precision, stream);
      w = r.at[1];
    }
    if (dweight) {
      cast_to_16bit(r.at[2], in, int64_t(N) * I, precision, stream);
      a = r.at[2];
    }
  }
  if (din) gemm(detail::cublas_on(stream), CUBLAS_OP_N, CUBLAS_OP_N, I, N, O, w, I, d, O, 0.0f, din, I, precision);
  if (dweight)
    gemm(detail::cublas_on(stream), CUBLAS_OP_N, CUBLAS_OP_T, I, O, N, a, I, d, O, 1.0f, dweight, I, precision);
  if (dbias) detail::bias_grad_accumulate(dbias, dout, N, O, stream);
}

}  // namespace hetrain::cuda
