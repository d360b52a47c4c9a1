// ops/common/dnnl_gemm.hpp — float GEMM on oneDNN (internal to the CPU ops; used by ops/common/gemm.hpp when
// available).
//
// OpenBLAS picks its kernels from the CPU's model number, and falls back to its oldest SSE3 kernels on a
// CPU it does not know (observed on a virtual machine whose CPU reports no model name: 4× slower than its
// AVX-512 kernels). oneDNN's GEMM is JIT-compiled from the instruction-set features the CPU reports, so
// it is fast wherever those are (docs/cpu-performance.md). Built from src/ops/common/dnnl/ with oneDNN, else
// from src/ops/common/dnnl_absent/ (available() false; OpenBLAS does all GEMMs).
#pragma once

namespace hetrain::ops::cpu::dnnl_gemm {

bool available();
// Row-major C [M, N] = alpha · op(A) · op(B) + beta · C; sizes already checked, M, N, K > 0.
void sgemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda, const float* B, int ldb,
           float beta, float* C, int ldc);

}  // namespace hetrain::ops::cpu::dnnl_gemm
