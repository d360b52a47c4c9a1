// kernels/nonfinite.cu — the NaN/Inf count (ops/nonfinite) and its CUDA slot. CPU twin:
// src/ops/nonfinite/nonfinite.cpp.
#include <cstdint>

#include "common.cuh"
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/nonfinite/nonfinite.hpp"

namespace hetrain::cuda {
namespace {
// Per-thread counts, reduced per warp, one atomic per warp (integer sums are exact in any order).
__global__ void count_nonfinite_kernel(unsigned long long* count, const float* x, int64_t n) {
  unsigned long long c = 0;
  HT_GRID_STRIDE(i, n) c += isfinite(x[i]) ? 0ull : 1ull;
  c = detail::warp_sum_u64(c);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);
}
}  // namespace

void count_nonfinite(int64_t* count, const float* x, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "count_nonfinite: negative size ", n);
  HT_CHECK(count, "count_nonfinite: null counter");
  if (n == 0) return;
  HT_CHECK(x, "count_nonfinite: null buffer");
  count_nonfinite_kernel<<<grid_for(n), kBlock, 0, stream>>>(reinterpret_cast<unsigned long long*>(count), x, n);
  HT_CUDA_CHECK_LAUNCH("count_nonfinite");
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
namespace {
int64_t count_nonfinite_cuda(const float* x, int64_t n) {
  // One counter for the process: allocating (and freeing, which synchronises the device) every step
  // would cost more than the count. It is never freed: a static destructor runs after the CUDA runtime
  // may have shut down at exit, and cudaFree then fails; the context's memory goes with the process.
  static cuda::DeviceBuffer<int64_t>* count = new cuda::DeviceBuffer<int64_t>(1);
  cuda::memset_zero(count->data(), sizeof(int64_t));
  cuda::count_nonfinite(count->data(), x, n, nullptr);
  return count->download()[0];
}
}  // namespace
HT_OP_IMPLEMENTATION(count_nonfinite_impl, Device::CUDA, count_nonfinite_cuda);
}  // namespace hetrain::ops
