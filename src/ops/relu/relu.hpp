// ops/relu — ReLU on any device: its formulas here and in src/ops/relu/relu.cpp (CPU), its CUDA twin in
// kernels/relu.cu; both through the unary-op helper (ops/common/unary.hpp). Twin tests: test/ops, test/gpu.
#pragma once

#include "ops/common/unary.hpp"

namespace hetrain::ops {

// y = max(x, 0), NaN kept (PyTorch's relu); y may be x.
void relu_forward(const Tensor& y, const Tensor& x);
// dx = y <= 0 ? 0 : dy from the forward's output y (PyTorch's threshold_backward: dy passes where y is NaN);
// dx may be dy.
void relu_backward(const Tensor& dx, const Tensor& dy, const Tensor& y);

extern UnaryOp relu_op;

}  // namespace hetrain::ops
