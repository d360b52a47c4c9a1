// test/gpu/on_host/cuda_on_host.hpp — what lets the host compiler build kernels/*.cu and src/cuda/*.cu for
// test_gpu_on_host and build/on-host/hetrain (docs/testing.md, "GPU tests on the host"). The Makefile
// force-includes it (-include) after rewriting each launch `k<<<grid, block, shared, stream>>>(args)` into
// `::hetrain::on_host::launch("k", k, grid, block, shared, stream)(args)`.
//
// A launch runs at once, on the calling thread, block after block (grid.cpp): threads meet at
// __syncthreads and __shfl_xor_sync, so the kernel's own indexing, reductions and barriers run as written.
// What this cannot show: races between threads, the device's memory model, the order of work across streams
// (every launch completes before it returns), FMA contraction and nvcc's other float rewrites, speed. Only
// one-dimensional grids and blocks, which is all the kernels use.
#pragma once

// The CUDA headers keep these definitions when they are there before them (crt/host_defines.h).
#define __global__
#define __device__
#define __host__
#define __launch_bounds__(...)
// Blocks run one after another, so one static per kernel (and host thread) is each block's shared memory.
#define __shared__ static thread_local

// Included here, before the names below become macros, so that the kernels' own includes find them done.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>

#include "runtime.hpp"

namespace hetrain::on_host {

struct Index3 {
  unsigned x = 0, y = 0, z = 0;
};
// The running thread's coordinates, as threadIdx & co. name them in a kernel.
extern thread_local Index3 thread_idx, block_idx, block_dim, grid_dim;

// Runs `body` once per thread of a grid_size × block_size launch (see the file's header). An invalid
// configuration or a kernel whose threads disagree at a barrier sets the calling thread's CUDA error,
// which cudaGetLastError then returns, and prints why on stderr.
void run_grid(const char* kernel, long long grid_size, long long block_size, size_t shared_bytes,
              const std::function<void()>& body);

// The fiber's side of __syncthreads and of a warp shuffle of 8 bytes (the partner's value comes back).
void sync_threads();
uint64_t shuffle_xor(unsigned mask, uint64_t bits, int lane_mask, int width);

template <class T>
bool device_pointer(const T& v) {
  if constexpr (std::is_pointer_v<T>) return v == nullptr || in_device_memory(v, 0);
  return true;
}
// Prints which argument of `kernel` is not device memory and sets cudaErrorIllegalAddress.
void refuse_argument(const char* kernel, int index);

template <class... Params>
struct Launch {
  const char* name;
  void (*kernel)(Params...);
  long long grid, block;
  size_t shared;
  cudaStream_t stream;
  // The arguments are copied into the kernel's parameter types first, as a launch copies them to the device;
  // every pointer among them must be null or point into device memory (a host pointer faults on a GPU).
  template <class... Args>
  void operator()(Args&&... args) const {
    std::tuple<std::decay_t<Params>...> copied(std::forward<Args>(args)...);
    if (!usable_stream(stream, name)) return set_last_error(cudaErrorInvalidResourceHandle);
    int checked = 0;  // the arguments before the first that is not device memory
    const bool all_on_device =
        std::apply([&](const auto&... a) { return ((device_pointer(a) && ++checked) && ...); }, copied);
    if (!all_on_device) return refuse_argument(name, checked);
    auto* k = kernel;
    run_grid(name, grid, block, shared, [&] { std::apply(k, copied); });
    note_work(stream);
  }
};

template <class... Params, class Grid, class Block>
Launch<Params...> launch(const char* name, void (*kernel)(Params...), Grid grid, Block block, size_t shared = 0,
                         cudaStream_t stream = nullptr) {
  static_assert(std::is_integral_v<Grid> && std::is_integral_v<Block>, "only one-dimensional launches run on the host");
  return Launch<Params...>{name, kernel, static_cast<long long>(grid), static_cast<long long>(block), shared,
                          stream};
}

}  // namespace hetrain::on_host

#define threadIdx ::hetrain::on_host::thread_idx
#define blockIdx ::hetrain::on_host::block_idx
#define blockDim ::hetrain::on_host::block_dim
#define gridDim ::hetrain::on_host::grid_dim

inline void __syncthreads() { ::hetrain::on_host::sync_threads(); }

template <class T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>, "a shuffle moves up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = ::hetrain::on_host::shuffle_xor(mask, bits, lane_mask, width);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// Fibers switch only at the two calls above, so a read-modify-write cannot be interleaved.
template <class T>
inline T atomicAdd(T* address, T value) {
  const T old = *address;
  *address = old + value;
  return old;
}

// Rounded as written: the host compiler contracts nothing here (the build passes -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
