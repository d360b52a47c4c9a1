// test/gpu/on_host/runtime.hpp — what the CUDA runtime on the host (runtime.cpp) offers the rest of
// test/gpu/on_host: launches, and the host cuBLAS and NCCL.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace hetrain::on_host {
// Sets the calling thread's CUDA error, which the next cudaGetLastError returns and clears.
void set_last_error(cudaError_t e);
// Whether [p, p + bytes) lies inside one device allocation.
bool in_device_memory(const void* p, size_t bytes);
// Whether `stream` may take work: the legacy or per-thread default stream, or one created and not destroyed.
// When not, prints why on stderr (naming `who`).
bool usable_stream(cudaStream_t stream, const char* who);
// Marks `stream` (nullptr: the legacy default stream) as having work that a query has not seen yet.
void note_work(cudaStream_t stream);
}  // namespace hetrain::on_host
