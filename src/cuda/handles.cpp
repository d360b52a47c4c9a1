// src/cuda/handles.cpp — cuDNN and cuBLAS handles per thread and device.
//
// Handles are not thread-safe to share, and they bind to the device current at creation, so each thread
// keeps one per device. They live until the thread ends (cuDNN/cuBLAS clean up at process exit).
#include "cuda/handles.hpp"

#include <map>

#include "cuda/check.cuh"

namespace hetrain::cuda::detail {
namespace {
int current_device() {
  int dev = 0;
  HT_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

cudnnHandle_t cudnn_handle() {
  thread_local std::map<int, cudnnHandle_t> handles;
  const int dev = current_device();
  auto it = handles.find(dev);
  if (it != handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  HT_CUDNN_CHECK(cudnnCreate(&h));
  handles[dev] = h;
  return h;
}

cublasHandle_t cublas_handle() {
  thread_local std::map<int, cublasHandle_t> handles;
  const int dev = current_device();
  auto it = handles.find(dev);
  if (it != handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  HT_CUBLAS_CHECK(cublasCreate(&h));
  handles[dev] = h;
  return h;
}
}  // namespace

cudnnHandle_t cudnn_on(cudaStream_t stream) {
  cudnnHandle_t h = cudnn_handle();
  HT_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

cublasHandle_t cublas_on(cudaStream_t stream) {
  cublasHandle_t h = cublas_handle();
  HT_CUBLAS_CHECK(cublasSetStream(h, stream));
  HT_CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  return h;
}

}  // namespace hetrain::cuda::detail
