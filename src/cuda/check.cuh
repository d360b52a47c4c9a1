// src/cuda/check.cuh — error checks for CUDA runtime, cuDNN, cuBLAS and NCCL calls (private to the backend).
//
// Each macro names the failing call, its status code and the library's own message; HT_THROW adds file and
// line (and rank/host once set). Runtime API only: this project never calls the driver API (machines
// without a GPU have no libcuda).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "hetrain/error.hpp"

// Blame. The runtime keeps one "last error" per thread; a failing runtime call sets it, and cuDNN, cuBLAS
// and NCCL may leave one there from their own runtime calls. A kernel launch can only be checked through
// that slot (cudaGetLastError after the launch), so anything still in it would be blamed on the next kernel.
// Hence every check below takes the slot's content at the call that left it: a failed runtime call clears
// it as it throws; a library call empties it after every call and, when the call failed, names what the
// runtime said. A library call that succeeded handled what it left there (for instance NCCL's
// cudaErrorPeerAccessAlreadyEnabled), so that is dropped. Sticky errors (a kernel that faulted, e.g.
// cudaErrorIllegalAddress) cannot be cleared: they surface at whatever call comes next, and the launch
// check's message says so.
namespace hetrain::cuda::detail {
// Takes the thread's last CUDA error out of the runtime (cudaSuccess when none) — see above.
inline cudaError_t take_last_cuda_error() { return cudaGetLastError(); }
// " (CUDA last error: cudaErrorX)" or "" when the runtime had none.
inline std::string last_cuda_error_note() {
  const cudaError_t e = take_last_cuda_error();
  return e == cudaSuccess ? std::string() : std::string(" (CUDA last error: ") + cudaGetErrorName(e) + ")";
}
}  // namespace hetrain::cuda::detail

#define HT_CUDA_CHECK(call)                                                                          \
  do {                                                                                               \
    cudaError_t ht_cuda_rc_ = (call);                                                                \
    if (ht_cuda_rc_ != cudaSuccess) {                                                                \
      ::hetrain::cuda::detail::take_last_cuda_error();                                               \
      HT_THROW("CUDA call ", #call, " failed: ", cudaGetErrorName(ht_cuda_rc_), " (",                \
               static_cast<int>(ht_cuda_rc_), "): ", cudaGetErrorString(ht_cuda_rc_));               \
    }                                                                                                \
  } while (0)

#define HT_CUDNN_CHECK(call)                                                                         \
  do {                                                                                               \
    cudnnStatus_t ht_cudnn_rc_ = (call);                                                             \
    const std::string ht_cudnn_note_ = ::hetrain::cuda::detail::last_cuda_error_note();              \
    if (ht_cudnn_rc_ != CUDNN_STATUS_SUCCESS) {                                                      \
      HT_THROW("cuDNN call ", #call, " failed: ", cudnnGetErrorString(ht_cudnn_rc_), " (",           \
               static_cast<int>(ht_cudnn_rc_), ")", ht_cudnn_note_);                                 \
    }                                                                                                \
  } while (0)

#define HT_CUBLAS_CHECK(call)                                                                        \
  do {                                                                                               \
    cublasStatus_t ht_cublas_rc_ = (call);                                                           \
    const std::string ht_cublas_note_ = ::hetrain::cuda::detail::last_cuda_error_note();             \
    if (ht_cublas_rc_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      HT_THROW("cuBLAS call ", #call, " failed: ", cublasGetStatusString(ht_cublas_rc_), " (",       \
               static_cast<int>(ht_cublas_rc_), ")", ht_cublas_note_);                               \
    }                                                                                                \
  } while (0)

#define HT_NCCL_CHECK(call)                                                                          \
  do {                                                                                               \
    ncclResult_t ht_nccl_rc_ = (call);                                                               \
    const std::string ht_nccl_note_ = ::hetrain::cuda::detail::last_cuda_error_note();               \
    if (ht_nccl_rc_ != ncclSuccess && ht_nccl_rc_ != ncclInProgress) {                               \
      HT_THROW("NCCL call ", #call, " failed: ", ncclGetErrorString(ht_nccl_rc_), " (",              \
               static_cast<int>(ht_nccl_rc_), ")", ht_nccl_note_);                                   \
    }                                                                                                \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next synchronisation.
// cudaGetLastError (not cudaPeekAtLastError): it also clears this launch's error, so that it is not
// reported again at a later launch. The checks above keep other calls' errors out of the slot.
#define HT_CUDA_CHECK_LAUNCH(kernel_name) HT_CUDA_CHECK_NAMED(cudaGetLastError(), kernel_name)
#define HT_CUDA_CHECK_NAMED(call, what)                                                              \
  do {                                                                                               \
    cudaError_t ht_cuda_rc_ = (call);                                                                \
    if (ht_cuda_rc_ != cudaSuccess) {                                                                \
      HT_THROW("CUDA kernel ", what, " failed to launch: ", cudaGetErrorName(ht_cuda_rc_), ": ",      \
               cudaGetErrorString(ht_cuda_rc_),                                                      \
               " (a sticky error of earlier asynchronous work also shows here; CUDA_LAUNCH_BLOCKING=1 "  \
               "pins such an error to its kernel)");                                                 \
    }                                                                                                \
  } while (0)

#define HT_CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
