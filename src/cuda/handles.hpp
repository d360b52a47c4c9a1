// src/cuda/handles.hpp — library handles, one per (thread, device), created on first use (private).
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

namespace hetrain::cuda::detail {
cudnnHandle_t cudnn_handle();    // for the current device of this thread
cublasHandle_t cublas_handle();  // for the current device of this thread
}  // namespace hetrain::cuda::detail
