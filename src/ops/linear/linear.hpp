// ops/linear — the dense layer's products on any device. CPU: cpu::linear_* (src/ops/linear/linear_cpu.cpp, fixed
// 16-row blocks); CUDA: cuda::linear_* (cuBLAS, src/cuda/linear_cublas.cpp).
#pragma once

#include "hetrain/precision.hpp"
#include "ops/dispatch.hpp"

namespace hetrain::ops {

struct LinearOptions {
  Precision precision = Precision::FP32;  // GPU only (hetrain/precision.hpp); the CPU computes in FP32
};

// y [N, O] = x [N, I] · w [O, I]ᵀ + b [O] (b may be undefined).
void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const LinearOptions& o = {});
// dx [N, I] overwritten (undefined: not needed); dw, db accumulated (db may be undefined).
void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                     const Tensor& w, const LinearOptions& o = {});

using LinearForwardFn = void(float* y, const float* x, const float* w, const float* b, int N, int I, int O,
                             Precision precision);
using LinearBackwardFn = void(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                              int N, int I, int O, Precision precision);
extern Dispatch<LinearForwardFn> linear_forward_impl;
extern Dispatch<LinearBackwardFn> linear_backward_impl;

}  // namespace hetrain::ops
