// src/cuda/scratch.cpp — see scratch.hpp. One set of buffers per (thread, device), like the library handles.
#include "cuda/scratch.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda::detail {
namespace {
struct Buffer {
  float* p = nullptr;
  size_t n = 0;
};
struct DeviceScratch {
  Buffer ones, zeros, discard;
};

DeviceScratch& scratch_of_current_device() {
  thread_local std::map<int, DeviceScratch> per_device;
  int dev = 0;
  HT_CUDA_CHECK(cudaGetDevice(&dev));
  return per_device[dev];
}

// Grows b to at least n floats filled with `value` (or left unset when fill is false). Growth waits for the
// device first: work queued on any stream may still read the old buffer. Buffers are never freed (freeing
// at thread or process exit races with the runtime's own teardown); they are small next to activations.
float* grow(Buffer& b, size_t n, bool fill, float value) {
  if (n <= b.n) return b.p;
  const size_t want = std::max(n, 2 * b.n);
  float* p = static_cast<float*>(device_alloc(want * sizeof(float)));
  if (fill) {
    std::vector<float> host(want, value);
    HT_CUDA_CHECK(cudaMemcpy(p, host.data(), want * sizeof(float), cudaMemcpyHostToDevice));
  }
  if (b.p) {
    HT_CUDA_CHECK(cudaDeviceSynchronize());
    device_free(b.p);
  }
  b.p = p, b.n = want;
  return p;
}
}  // namespace

const float* device_ones(size_t n) { return grow(scratch_of_current_device().ones, n, true, 1.0f); }
const float* device_zeros(size_t n) { return grow(scratch_of_current_device().zeros, n, true, 0.0f); }
float* device_discard(size_t n) { return grow(scratch_of_current_device().discard, n, false, 0.0f); }

}  // namespace hetrain::cuda::detail
