// ops/common/unary.hpp — what every element-wise op of one input shares (ReLU, SiLU, sigmoid, ...): its two
// dispatch tables, its checked entry points, and its CPU loops. An op supplies only its formulas:
//
//   UnaryOp relu_op("relu_forward", "relu_backward", UnaryOp::Saved::Output);  // in the op's .cpp
//   struct ReluCpu { template <typename T> T operator()(T x) const; // y from x
//                    template <typename T> T operator()(T dy, T saved) const; };  // dx from dy and saved
//   HT_UNARY_CPU(relu_op, ReluCpu);                                 // registers the CPU slots (float)
//
// (the CPU loops are in ops/common/unary_cpu.hpp), and its CUDA twin does the same with kernels/unary.cuh. `saved` is what backward reads: the forward's
// input (SiLU) or its output (ReLU, sigmoid); the op's header says which.
#pragma once

#include <cstdint>

#include "ops/dispatch.hpp"

namespace hetrain::ops {

using UnaryFn = void(float* y, const float* x, int64_t n);
using UnaryBackwardFn = void(float* dx, const float* dy, const float* saved, int64_t n);

class UnaryOp {
 public:
  // What backward reads besides dy: the forward's input or its output.
  enum class Saved { Input, Output };
  constexpr UnaryOp(const char* forward_name, const char* backward_name, Saved saved)
      : forward_impl(forward_name), backward_impl(backward_name), saved_(saved) {}
  Saved saved() const { return saved_; }
  // y = f(x); y and x have the same shape and device (y may be x).
  void forward(const Tensor& y, const Tensor& x) const;
  // dx = f'(dy, saved); all three have the same shape and device (dx may be dy).
  void backward(const Tensor& dx, const Tensor& dy, const Tensor& saved) const;

  Dispatch<UnaryFn> forward_impl;
  Dispatch<UnaryBackwardFn> backward_impl;

 private:
  Saved saved_;
};

}  // namespace hetrain::ops
