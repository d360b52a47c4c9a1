// src/cuda/low_precision.cpp — see low_precision.hpp: the per-device scratch of the 16-bit operands.
#include "cuda/low_precision.hpp"

#include <map>
#include <mutex>

#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
std::mutex g_mutex;
// Never destroyed: freeing device memory while the process exits races with the runtime's own teardown.
std::map<int, DeviceBuffer<char>>& by_device() {
  static auto* m = new std::map<int, DeviceBuffer<char>>();
  return *m;
}

int current_device() {
  int dev = 0;
  HT_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}
}  // namespace

namespace detail {
char* low_precision_scratch(size_t bytes) {
  if (bytes == 0) return nullptr;
  const int dev = current_device();
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceBuffer<char>& buf = by_device()[dev];
  if (buf.size() < bytes) {
    // Work already enqueued (on any stream) may still read the old block: wait for it, then free it before
    // allocating the larger one, so that the two never have to fit together.
    HT_CUDA_CHECK(cudaDeviceSynchronize());
    buf = DeviceBuffer<char>();
    buf = DeviceBuffer<char>(bytes);
  }
  return buf.data();
}
}  // namespace detail

size_t low_precision_scratch_bytes() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (by_device().empty()) return 0;  // nothing allocated: no need to ask for a device (there may be none)
  auto it = by_device().find(current_device());
  return it == by_device().end() ? 0 : it->second.size();
}

}  // namespace hetrain::cuda
