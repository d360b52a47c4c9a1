// test/gpu/on_host/runtime.hpp — the host runtime's side of a launch (runtime.cpp, grid.cpp).
#pragma once

#include <cuda_runtime_api.h>

namespace hetrain::on_host {
// Sets the calling thread's CUDA error, which the next cudaGetLastError returns and clears.
void set_last_error(cudaError_t e);
// Marks `stream` (nullptr: the legacy default stream) as having work that a query has not seen yet.
void note_work(cudaStream_t stream);
}  // namespace hetrain::on_host
