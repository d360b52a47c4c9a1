// ops/silu — SiLU, y = x·σ(x) (YOLOv5's activation), and the logistic sigmoid σ(x) on its own.
// Derivatives: SiLU' = σ(x)·(1 + x·(1 − σ(x))); σ' = σ·(1 − σ), computed from the saved output.
#pragma once

#include <cstdint>

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// y = silu(x); y and x have the same shape and device (y may be x).
void silu_forward(const Tensor& y, const Tensor& x);
// dx = dy·silu'(x), from the forward's input x; dx may be dy.
void silu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x);
// y = σ(x); y may be x.
void sigmoid_forward(const Tensor& y, const Tensor& x);
// dx = dy·y·(1 − y), from the forward's output y; dx may be dy.
void sigmoid_backward(const Tensor& dx, const Tensor& dy, const Tensor& y);

// The CPU implementations, for float and double.
template <typename T>
void silu_forward_cpu(T* y, const T* x, int64_t n);
template <typename T>
void silu_backward_cpu(T* dx, const T* dy, const T* x, int64_t n);
template <typename T>
void sigmoid_forward_cpu(T* y, const T* x, int64_t n);
template <typename T>
void sigmoid_backward_cpu(T* dx, const T* dy, const T* y, int64_t n);

// Per-device implementations on raw float pointers of the tensors' device (CUDA: the legacy default stream).
using UnaryFn = void(float* y, const float* x, int64_t n);
using UnaryBackwardFn = void(float* dx, const float* dy, const float* saved, int64_t n);
extern Dispatch<UnaryFn> silu_forward_impl;
extern Dispatch<UnaryBackwardFn> silu_backward_impl;
extern Dispatch<UnaryFn> sigmoid_forward_impl;
extern Dispatch<UnaryBackwardFn> sigmoid_backward_impl;

}  // namespace hetrain::ops
