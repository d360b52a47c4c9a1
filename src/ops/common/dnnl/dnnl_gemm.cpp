// ops/common/dnnl/dnnl_gemm.cpp — float GEMM on oneDNN's JIT kernels (see ops/common/dnnl_gemm.hpp).
#include <dnnl.h>

#include "ops/common/dnnl_gemm.hpp"
#include "hetrain/error.hpp"

namespace hetrain::ops::cpu::dnnl_gemm {

bool available() { return true; }

void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc) {
  // dnnl_sgemm is row-major, like hetrain's tensors.
  const dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  HT_CHECK(st == dnnl_success, "gemm (oneDNN): failed with status ", int(st), " for M=", M, " N=", N, " K=", K);
}

}  // namespace hetrain::ops::cpu::dnnl_gemm
