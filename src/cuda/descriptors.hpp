// src/cuda/descriptors.hpp — RAII cuDNN descriptors made per call (private to the backend).
//
// The ops below take N per call (a rank's batch changes from step to step), so their descriptors are made
// on each call: creating and setting one costs about a microsecond on the host, far below a kernel launch.
#pragma once

#include <cudnn.h>

#include "cuda/check.cuh"

namespace hetrain::cuda::detail {

// A float NCHW tensor descriptor.
class TensorDesc {
 public:
  TensorDesc(int n, int c, int h, int w) {
    HT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d_));
    cudnnStatus_t rc = cudnnSetTensor4dDescriptor(d_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w);
    if (rc != CUDNN_STATUS_SUCCESS) {
      cudnnDestroyTensorDescriptor(d_);
      HT_THROW("cuDNN tensor descriptor [", n, ", ", c, ", ", h, ", ", w, "] rejected: ", cudnnGetErrorString(rc));
    }
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  operator cudnnTensorDescriptor_t() const { return d_; }

 private:
  cudnnTensorDescriptor_t d_ = nullptr;
};

}  // namespace hetrain::cuda::detail
