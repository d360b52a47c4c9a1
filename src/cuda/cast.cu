// src/cuda/cast.cu — float ↔ bfloat16 / IEEE half for the 16-bit convolutions and dense layers
// (src/cuda/conv_cudnn.cpp, src/cuda/linear_cublas.cpp; docs/precision.md).
// CPU twin: test/gpu/twins.cpp's round_to_16bit, bit for bit.
//
// The conversions are CUDA's own intrinsics, __float2bfloat16_rn and __float2half_rn: round to nearest, ties
// to even, overflow to ±Inf, NaN kept. Widening back to float is exact.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
struct Bf16 {
  using T = __nv_bfloat16;
  __device__ static T narrow(float x) { return __float2bfloat16_rn(x); }
  __device__ static float widen(T h) { return __bfloat162float(h); }
};
struct Fp16 {
  using T = __half;
  __device__ static T narrow(float x) { return __float2half_rn(x); }
  __device__ static float widen(T h) { return __half2float(h); }
};

template <typename F>
__global__ void narrow_kernel(typename F::T* out, const float* in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = F::narrow(in[i]);
}

template <typename F>
__global__ void widen_kernel(float* out, const typename F::T* in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = F::widen(in[i]);
}

template <typename F>
__global__ void accumulate_kernel(float* acc, const typename F::T* in, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    acc[i] += F::widen(in[i]);
}

// Checks a launcher's arguments; false when there is nothing to do (n == 0).
bool check_args(const char* who, const void* a, const void* b, int64_t n, Precision precision) {
  HT_CHECK(is_16bit(precision), who, ": precision ", precision_name(precision), " has no 16-bit type (bf16 or fp16)");
  HT_CHECK(n >= 0, who, ": negative size ", n);
  if (n == 0) return false;
  HT_CHECK(a && b, who, ": null pointer");
  return true;
}
}  // namespace

void cast_to_16bit(void* half, const float* in, int64_t n, Precision precision, CudaStream stream) {
  if (!check_args("cast_to_16bit", half, in, n, precision)) return;
  if (precision == Precision::BF16)
    narrow_kernel<Bf16><<<grid_for(n), kBlock, 0, stream>>>(static_cast<Bf16::T*>(half), in, n);
  else
    narrow_kernel<Fp16><<<grid_for(n), kBlock, 0, stream>>>(static_cast<Fp16::T*>(half), in, n);
  HT_CUDA_CHECK_LAUNCH("cast_to_16bit");
}

void cast_from_16bit(float* out, const void* half, int64_t n, Precision precision, CudaStream stream) {
  if (!check_args("cast_from_16bit", out, half, n, precision)) return;
  if (precision == Precision::BF16)
    widen_kernel<Bf16><<<grid_for(n), kBlock, 0, stream>>>(out, static_cast<const Bf16::T*>(half), n);
  else
    widen_kernel<Fp16><<<grid_for(n), kBlock, 0, stream>>>(out, static_cast<const Fp16::T*>(half), n);
  HT_CUDA_CHECK_LAUNCH("cast_from_16bit");
}

void accumulate_16bit(float* acc, const void* half, int64_t n, Precision precision, CudaStream stream) {
  if (!check_args("accumulate_16bit", acc, half, n, precision)) return;
  if (precision == Precision::BF16)
    accumulate_kernel<Bf16><<<grid_for(n), kBlock, 0, stream>>>(acc, static_cast<const Bf16::T*>(half), n);
  else
    accumulate_kernel<Fp16><<<grid_for(n), kBlock, 0, stream>>>(acc, static_cast<const Fp16::T*>(half), n);
  HT_CUDA_CHECK_LAUNCH("accumulate_16bit");
}

}  // namespace hetrain::cuda
