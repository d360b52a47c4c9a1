// ops/silu — SiLU, y = x·σ(x) (YOLOv5's activation), and the logistic sigmoid σ(x) on its own, through the
// unary-op helper (ops/common/unary.hpp); CUDA twins in kernels/silu.cu.
// Derivatives: SiLU' = σ(x)·(1 + x·(1 − σ(x))), from the saved input; σ' = σ·(1 − σ), from the saved output.
#pragma once

#include <cstdint>

#include "ops/common/unary.hpp"

namespace hetrain::ops {

// y = silu(x); y and x have the same shape and device (y may be x).
void silu_forward(const Tensor& y, const Tensor& x);
// dx = dy·silu'(x), from the forward's input x; dx may be dy.
void silu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x);
// y = σ(x); y may be x.
void sigmoid_forward(const Tensor& y, const Tensor& x);
// dx = dy·y·(1 − y), from the forward's output y; dx may be dy.
void sigmoid_backward(const Tensor& dx, const Tensor& dy, const Tensor& y);

extern UnaryOp silu_op, sigmoid_op;

// The CPU implementations, for float and double (double is the reference of gradient checks).
template <typename T>
void silu_forward_cpu(T* y, const T* x, int64_t n);
template <typename T>
void silu_backward_cpu(T* dx, const T* dy, const T* x, int64_t n);
template <typename T>
void sigmoid_forward_cpu(T* y, const T* x, int64_t n);
template <typename T>
void sigmoid_backward_cpu(T* dx, const T* dy, const T* y, int64_t n);

}  // namespace hetrain::ops
