// ops/relu — ReLU on any device. CPU: cpu::relu_* (src/cpu/elementwise.cpp, vector clones); CUDA:
// cuda::relu_* (cuDNN activation, src/cuda/relu_cudnn.cpp). Their twin tests are test/ops and test/gpu.
#pragma once

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// y = max(x, 0); y may be x.
void relu_forward(const Tensor& y, const Tensor& x);
// dx = dy·[y > 0] from the forward's output y; dx may be dy.
void relu_backward(const Tensor& dx, const Tensor& dy, const Tensor& y);

using ReluFn = void(float* y, const float* x, int64_t n);
using ReluBackwardFn = void(float* dx, const float* dy, const float* y, int64_t n);
extern Dispatch<ReluFn> relu_forward_impl;
extern Dispatch<ReluBackwardFn> relu_backward_impl;

}  // namespace hetrain::ops
