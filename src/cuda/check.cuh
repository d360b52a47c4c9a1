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

#include "hetrain/error.hpp"

#define HT_CUDA_CHECK(call)                                                                          \
  do {                                                                                               \
    cudaError_t ht_cuda_rc_ = (call);                                                                \
    if (ht_cuda_rc_ != cudaSuccess) {                                                                \
      HT_THROW("CUDA call ", #call, " failed: ", cudaGetErrorName(ht_cuda_rc_), " (",                \
               static_cast<int>(ht_cuda_rc_), "): ", cudaGetErrorString(ht_cuda_rc_));               \
    }                                                                                                \
  } while (0)

#define HT_CUDNN_CHECK(call)                                                                         \
  do {                                                                                               \
    cudnnStatus_t ht_cudnn_rc_ = (call);                                                             \
    if (ht_cudnn_rc_ != CUDNN_STATUS_SUCCESS) {                                                      \
      HT_THROW("cuDNN call ", #call, " failed: ", cudnnGetErrorString(ht_cudnn_rc_), " (",           \
               static_cast<int>(ht_cudnn_rc_), ")");                                                 \
    }                                                                                                \
  } while (0)

#define HT_CUBLAS_CHECK(call)                                                                        \
  do {                                                                                               \
    cublasStatus_t ht_cublas_rc_ = (call);                                                           \
    if (ht_cublas_rc_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      HT_THROW("cuBLAS call ", #call, " failed: ", cublasGetStatusString(ht_cublas_rc_), " (",       \
               static_cast<int>(ht_cublas_rc_), ")");                                                \
    }                                                                                                \
  } while (0)

#define HT_NCCL_CHECK(call)                                                                          \
  do {                                                                                               \
    ncclResult_t ht_nccl_rc_ = (call);                                                               \
    if (ht_nccl_rc_ != ncclSuccess && ht_nccl_rc_ != ncclInProgress) {                               \
      HT_THROW("NCCL call ", #call, " failed: ", ncclGetErrorString(ht_nccl_rc_), " (",              \
               static_cast<int>(ht_nccl_rc_), ")");                                                  \
    }                                                                                                \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at the next synchronisation.
#define HT_CUDA_CHECK_LAUNCH(kernel_name) HT_CUDA_CHECK_NAMED(cudaGetLastError(), kernel_name)
#define HT_CUDA_CHECK_NAMED(call, what)                                                              \
  do {                                                                                               \
    cudaError_t ht_cuda_rc_ = (call);                                                                \
    if (ht_cuda_rc_ != cudaSuccess) {                                                                \
      HT_THROW("CUDA kernel ", what, " failed to launch: ", cudaGetErrorName(ht_cuda_rc_), ": ",      \
               cudaGetErrorString(ht_cuda_rc_));                                                     \
    }                                                                                                \
  } while (0)

#define HT_CEIL_DIV(a, b) (((a) + (b) - 1) / (b))
