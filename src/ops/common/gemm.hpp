// ops/common/gemm.hpp — row-major GEMM, overloaded by scalar type (internal to the CPU ops): float on oneDNN when built
// with it (dnnl_gemm.hpp says why), else OpenBLAS; double always OpenBLAS.
//
// C [M, N] = alpha · op(A) · op(B) + beta · C, op(X) = X or Xᵀ. BLAS itself reports nothing useful on bad
// arguments, so the sizes are checked here; empty products are handled here too (OpenBLAS rejects
// lda = 0), and K = 0 scales C by beta as the math says.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <cstdint>

#include "ops/common/dnnl_gemm.hpp"
#include "hetrain/error.hpp"

namespace hetrain::ops::cpu::detail {

inline void check_gemm(bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldc) {
  HT_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: negative size M=", M, " N=", N, " K=", K);
  HT_CHECK(lda >= std::max(1, ta ? M : K), "gemm: lda ", lda, " too small");
  HT_CHECK(ldb >= std::max(1, tb ? K : N), "gemm: ldb ", ldb, " too small");
  HT_CHECK(ldc >= std::max(1, N), "gemm: ldc ", ldc, " too small");
}

// Returns true when the product is empty and C has been handled.
template <typename T>
bool gemm_trivial(int M, int N, int K, T beta, T* C, int ldc) {
  if (M == 0 || N == 0) return true;
  if (K > 0) return false;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) C[int64_t(i) * ldc + j] = beta == T(0) ? T(0) : beta * C[int64_t(i) * ldc + j];
  return true;
}

inline void gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
                 int ldb, float beta, float* C, int ldc) {
  check_gemm(ta, tb, M, N, K, lda, ldb, ldc);
  if (gemm_trivial(M, N, K, beta, C, ldc)) return;
  if (dnnl_gemm::available()) return dnnl_gemm::sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
              lda, B, ldb, beta, C, ldc);
}

inline void gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda, const double* B,
                 int ldb, double beta, double* C, int ldc) {
  check_gemm(ta, tb, M, N, K, lda, ldb, ldc);
  if (gemm_trivial(M, N, K, beta, C, ldc)) return;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
              lda, B, ldb, beta, C, ldc);
}

}  // namespace hetrain::ops::cpu::detail
