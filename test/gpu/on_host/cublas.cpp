// test/gpu/on_host/cublas.cpp — the cuBLAS calls hetrain makes (src/cuda/handles.cpp, linear_cublas.cpp), on
// the host, for test_gpu_on_host and hetrain-on-host: a plain column-major GEMM. These definitions take
// the place of libcublas's for the program (it is still linked for the rest, which finds no GPU).
//
// cublasGemmEx as the dense layer calls it: A and B in FP32, BF16 or FP16, C in FP32, FP32 compute (TF32
// rounds A and B to TF32's 10-bit mantissa first, as the tensor cores do), host alpha and beta. Anything
// else returns CUBLAS_STATUS_NOT_SUPPORTED. Operands must lie inside device allocations, as on a GPU.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <list>
#include <mutex>
#include <vector>

#include "runtime.hpp"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace {
// Every live handle. hetrain keeps its handles until the process ends, as cuBLAS allows; held here they
// are not leaks to AddressSanitizer.
std::mutex handles_mutex;
std::list<cublasContext> handles;

cublasStatus_t refuse(cublasStatus_t status, const char* why) {
  std::fprintf(stderr, "cuda on host: cublasGemmEx: %s\n", why);
  return status;
}

float round_to_tf32(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x1000u) & ~0x1fffu;  // to nearest, ties away; inf/NaN kept
  std::memcpy(&x, &b, 4);
  return x;
}

float load(const void* p, cudaDataType type, int64_t i, bool tf32) {
  switch (type) {
    case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    default: {
      const float v = static_cast<const float*>(p)[i];
      return tf32 ? round_to_tf32(v) : v;
    }
  }
}

size_t element_bytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

// C = alpha·a·b + beta·C for a (m×k) and b (k×n) packed column-major; with beta 0, C is not read (it may
// hold NaN).
void multiply(float* c, int ldc, const float* a, const float* b, int m, int n, int k, float alpha, float beta) {
  std::vector<float> column(static_cast<size_t>(m));
  for (int j = 0; j < n; ++j) {
    std::fill(column.begin(), column.end(), 0.0f);
    for (int p = 0; p < k; ++p) {
      const float bv = b[size_t(j) * k + p];
      const float* ap = a + size_t(p) * m;
      for (int i = 0; i < m; ++i) column[size_t(i)] += ap[i] * bv;
    }
    float* cj = c + int64_t(j) * ldc;
    for (int i = 0; i < m; ++i) cj[i] = beta == 0.0f ? alpha * column[size_t(i)] : alpha * column[size_t(i)] + beta * cj[i];
  }
}
}  // namespace

extern "C" {
cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  std::lock_guard<std::mutex> lock(handles_mutex);
  *handle = &handles.emplace_back();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  std::lock_guard<std::mutex> lock(handles_mutex);
  handles.remove_if([&](const cublasContext& c) { return &c == handle; });
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t) {
  const bool tf32 = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  const bool sixteen = Atype == CUDA_R_16BF || Atype == CUDA_R_16F;
  if (handle->pointer_mode != CUBLAS_POINTER_MODE_HOST) return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "device alpha/beta");
  if (!hetrain::on_host::usable_stream(handle->stream, "cublasGemmEx")) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (Ctype != CUDA_R_32F || Btype != Atype || (Atype != CUDA_R_32F && !sixteen) ||
      (compute != CUBLAS_COMPUTE_32F && !tf32) || (tf32 && sixteen))
    return refuse(CUBLAS_STATUS_NOT_SUPPORTED, "a type combination the dense layer does not use");
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  // op(A) is m×k, op(B) k×n, C m×n, all column-major.
  const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < (a_rows > 1 ? a_rows : 1) || ldb < (b_rows > 1 ? b_rows : 1) ||
      ldc < (m > 1 ? m : 1))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "bad sizes or leading dimensions");
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  // The bytes from a matrix's first element to its last.
  auto extent = [](int ld, int rows, int cols, cudaDataType t) {
    return (size_t(ld) * size_t(cols - 1) + size_t(rows)) * element_bytes(t);
  };
  using hetrain::on_host::in_device_memory;
  if ((k > 0 && (!in_device_memory(A, extent(lda, a_rows, a_cols, Atype)) ||
                 !in_device_memory(B, extent(ldb, b_rows, b_cols, Btype)))) ||
      !in_device_memory(C, extent(ldc, m, n, Ctype)))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "an operand outside device memory (or past its allocation)");
  auto overlap = [](const void* a, size_t an, const void* b, size_t bn) {
    const char *x = static_cast<const char*>(a), *y = static_cast<const char*>(b);
    return x < y + bn && y < x + an;
  };
  const size_t c_bytes = extent(ldc, m, n, Ctype);
  if (k > 0 && (overlap(C, c_bytes, A, extent(lda, a_rows, a_cols, Atype)) ||
                overlap(C, c_bytes, B, extent(ldb, b_rows, b_cols, Btype))))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, "C overlaps A or B (undefined in cuBLAS)");
  // op(A) and op(B) as plain float, column-major and contiguous, then C column by column: each element a
  // sum over p in order, in float.
  std::vector<float> a(size_t(m) * size_t(k)), bm(size_t(k) * size_t(n));
  for (int p = 0; p < k; ++p)
    for (int i = 0; i < m; ++i) a[size_t(p) * m + i] = load(A, Atype, ta ? int64_t(i) * lda + p : int64_t(p) * lda + i, tf32);
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < k; ++p) bm[size_t(j) * k + p] = load(B, Btype, tb ? int64_t(p) * ldb + j : int64_t(j) * ldb + p, tf32);
  multiply(static_cast<float*>(C), ldc, a.data(), bm.data(), m, n, k, *static_cast<const float*>(alpha),
           *static_cast<const float*>(beta));
  hetrain::on_host::note_work(handle->stream);
  return CUBLAS_STATUS_SUCCESS;
}
}  // extern "C"
