// kernels/unary.cuh — the CUDA side of the unary-op helper (ops/common/unary.hpp): one grid-stride kernel per
// direction, instantiated with the op's formulas. An op writes a struct with __device__ operators and names:
//
//   struct Relu {
//     static constexpr const char* kForward = "relu_forward";
//     static constexpr const char* kBackward = "relu_backward";
//     __device__ float operator()(float x) const;             // y from x
//     __device__ float operator()(float dy, float s) const;   // dx from dy and the saved tensor
//   };
//   HT_UNARY_CUDA(relu_op, Relu);  // fills the op's CUDA slots (legacy default stream)
#pragma once

#include <cstdint>

#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/common/unary.hpp"

namespace hetrain::cuda {

template <typename F>
__global__ void unary_forward_kernel(float* y, const float* x, int64_t n) {
  HT_GRID_STRIDE(i, n) y[i] = F{}(x[i]);
}
template <typename F>
__global__ void unary_backward_kernel(float* dx, const float* dy, const float* saved, int64_t n) {
  HT_GRID_STRIDE(i, n) dx[i] = F{}(dy[i], saved[i]);
}

template <typename F>
void unary_forward(float* y, const float* x, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, F::kForward, ": negative size ", n);
  if (n == 0) return;
  HT_CHECK(y && x, F::kForward, ": null pointer");
  unary_forward_kernel<F><<<grid_for(n), kBlock, 0, stream>>>(y, x, n);
  HT_CUDA_CHECK_LAUNCH(F::kForward);
}
template <typename F>
void unary_backward(float* dx, const float* dy, const float* saved, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, F::kBackward, ": negative size ", n);
  if (n == 0) return;
  HT_CHECK(dx && dy && saved, F::kBackward, ": null pointer");
  unary_backward_kernel<F><<<grid_for(n), kBlock, 0, stream>>>(dx, dy, saved, n);
  HT_CUDA_CHECK_LAUNCH(F::kBackward);
}

// The slots: the same on the legacy default stream, as every op's slot runs.
template <typename F>
void unary_forward_slot(float* y, const float* x, int64_t n) {
  unary_forward<F>(y, x, n, nullptr);
}
template <typename F>
void unary_backward_slot(float* dx, const float* dy, const float* saved, int64_t n) {
  unary_backward<F>(dx, dy, saved, n, nullptr);
}

}  // namespace hetrain::cuda

#define HT_UNARY_CUDA(op, F)                                                                          \
  HT_OP_IMPLEMENTATION((op).forward_impl, ::hetrain::Device::CUDA, (::hetrain::cuda::unary_forward_slot<F>)); \
  HT_OP_IMPLEMENTATION((op).backward_impl, ::hetrain::Device::CUDA, (::hetrain::cuda::unary_backward_slot<F>))
