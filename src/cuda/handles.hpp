// src/cuda/handles.hpp — library handles, one per (thread, device), created on first use (private).
//
// A handle keeps the stream it was last given, so every call takes its stream explicitly: fetch the handle
// with the stream of the call that follows, right before it. A handle left on an earlier stream would run the
// next call there, or on a stream that has been destroyed since (a GPU test creates and destroys its own).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace hetrain::cuda::detail {
// The current device's handle of this thread, set to `stream` (nullptr: the legacy default stream).
cudnnHandle_t cudnn_on(cudaStream_t stream);
// The same for cuBLAS, also with the host pointer mode (alpha and beta live on the host).
cublasHandle_t cublas_on(cudaStream_t stream);
}  // namespace hetrain::cuda::detail
