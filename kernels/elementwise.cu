// kernels/elementwise.cu — residual add, gradient accumulation, scaling, and the NaN/Inf count.
// CPU twins: cpu::add_forward, cpu::accumulate (hetrain/ops.hpp); scale's and count_nonfinite's are in test/gpu.
#include <cstdint>

#include "common.cuh"
#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
constexpr int kBlock = 256;
constexpr int64_t kMaxGrid = 8192;  // grid-stride loops cover the rest; bounds the count's atomics

int grid_for(int64_t n) {
  int64_t g = HT_CEIL_DIV(n, int64_t(kBlock));
  return int(g < kMaxGrid ? g : kMaxGrid);
}

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* acc, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] += x[i];
}

__global__ void scale_kernel(float* x, float a, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] *= a;
}

// Per-thread counts, reduced per warp, one atomic per warp (integer sums are exact in any order).
__global__ void count_nonfinite_kernel(unsigned long long* count, const float* x, int64_t n) {
  unsigned long long c = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    c += isfinite(x[i]) ? 0ull : 1ull;
  c = detail::warp_sum_u64(c);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);
}
}  // namespace

void add_forward(float* out, const float* a, const float* b, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "add_forward: negative size ", n);
  if (n == 0) return;
  HT_CHECK(out && a && b, "add_forward: null pointer");
  add_kernel<<<grid_for(n), kBlock, 0, stream>>>(out, a, b, n);
  HT_CUDA_CHECK_LAUNCH("add_forward");
}

void accumulate(float* acc, const float* x, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "accumulate: negative size ", n);
  if (n == 0) return;
  HT_CHECK(acc && x, "accumulate: null pointer");
  accumulate_kernel<<<grid_for(n), kBlock, 0, stream>>>(acc, x, n);
  HT_CUDA_CHECK_LAUNCH("accumulate");
}

void scale(float* x, float a, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "scale: negative size ", n);
  if (n == 0) return;
  HT_CHECK(x, "scale: null pointer");
  scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, a, n);
  HT_CUDA_CHECK_LAUNCH("scale");
}

void count_nonfinite(int64_t* count, const float* x, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "count_nonfinite: negative size ", n);
  HT_CHECK(count, "count_nonfinite: null counter");
  if (n == 0) return;
  HT_CHECK(x, "count_nonfinite: null buffer");
  count_nonfinite_kernel<<<grid_for(n), kBlock, 0, stream>>>(reinterpret_cast<unsigned long long*>(count), x, n);
  HT_CUDA_CHECK_LAUNCH("count_nonfinite");
}

}  // namespace hetrain::cuda
