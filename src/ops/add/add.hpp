// ops/add — element-wise sums: the residual add, gradient accumulation, and add-then-ReLU (a residual
// block's output). CPU: src/ops/add/add_cpu.cpp (cpu::add_forward, cpu::accumulate) and a fused loop in
// add.cpp; CUDA: kernels/add.cu.
#pragma once

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// y = a + b (same shapes); y may alias a or b.
void add(const Tensor& y, const Tensor& a, const Tensor& b);
// acc += x
void accumulate(const Tensor& acc, const Tensor& x);
// y = max(a + b, 0), a NaN sum kept (ReLU's rule); y may alias a or b.
void add_relu(const Tensor& y, const Tensor& a, const Tensor& b);

using AddFn = void(float* y, const float* a, const float* b, int64_t n);
using AccumulateFn = void(float* acc, const float* x, int64_t n);
extern Dispatch<AddFn> add_impl;
extern Dispatch<AccumulateFn> accumulate_impl;
extern Dispatch<AddFn> add_relu_impl;

}  // namespace hetrain::ops
