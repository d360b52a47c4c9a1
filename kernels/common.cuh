// kernels/common.cuh — block and warp reductions shared by the custom kernels.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>

namespace hetrain::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}
__device__ inline unsigned long long warp_sum_u64(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Block-wide reductions; blockDim.x must be a multiple of 32 (≤ 1024). Every thread gets the result.
// `scratch` is 32 slots of shared memory; the trailing __syncthreads lets the caller reuse it at once.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : 0.0f;
  v = warp_sum(v);
  __syncthreads();
  return v;
}
__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : -FLT_MAX;
  v = warp_max(v);
  __syncthreads();
  return v;
}

// The same sum in double (statistics that a float sum over many values would round away).
__device__ inline double warp_sum_f64(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ inline double block_sum_f64(double v, double* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum_f64(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : 0.0;
  v = warp_sum_f64(v);
  __syncthreads();
  return v;
}

// Threads for a one-block-per-row kernel over K columns: K rounded up to whole warps, at most 256.
inline int row_block_size(int K) {
  int t = ((K + 31) / 32) * 32;
  return t < 256 ? t : 256;
}

}  // namespace hetrain::cuda::detail
