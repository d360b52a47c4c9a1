// ops/silu/silu.cpp — SiLU and sigmoid on the CPU, and their Tensor-level entry points.
//
// Compiled without trapping math: with it GCC keeps the clamps of cpu::exp_vectorizable as branches and
// the loops stay scalar (3× slower). hetrain never reads floating-point exception flags, and the option
// does not change any computed value.
#pragma GCC optimize("no-trapping-math")
#include "ops/silu/silu.hpp"

#include "ops/common/fast_exp.hpp"
#include "ops/common/unary_cpu.hpp"

namespace hetrain::ops {
namespace {
// 1 / (1 + e^−x): 0 and 1 at the ends. The float exp is one the loops can vectorise (SiLU runs after
// every convolution of a YOLO model: a scalar exp made it a large share of the step).
template <typename T>
inline T logistic(T x) {
  return T(1) / (T(1) + cpu::exp_vectorizable(-x));
}

struct SiluCpu {
  template <typename T>
  T operator()(T x) const {
    return x * logistic(x);
  }
  template <typename T>
  T operator()(T dy, T x) const {
    const T s = logistic(x);
    return dy * s * (T(1) + x * (T(1) - s));
  }
};
struct SigmoidCpu {
  template <typename T>
  T operator()(T x) const {
    return logistic(x);
  }
  template <typename T>
  T operator()(T dy, T y) const {
    return dy * y * (T(1) - y);
  }
};
}  // namespace

UnaryOp silu_op("silu_forward", "silu_backward", UnaryOp::Saved::Input);
UnaryOp sigmoid_op("sigmoid_forward", "sigmoid_backward", UnaryOp::Saved::Output);
HT_UNARY_CPU(silu_op, SiluCpu);
HT_UNARY_CPU(sigmoid_op, SigmoidCpu);

void silu_forward(const Tensor& y, const Tensor& x) { silu_op.forward(y, x); }
void silu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x) { silu_op.backward(dx, dy, x); }
void sigmoid_forward(const Tensor& y, const Tensor& x) { sigmoid_op.forward(y, x); }
void sigmoid_backward(const Tensor& dx, const Tensor& dy, const Tensor& y) { sigmoid_op.backward(dx, dy, y); }

template <typename T>
void silu_forward_cpu(T* y, const T* x, int64_t n) {
  unary_forward_cpu<SiluCpu>(y, x, n);
}
template <typename T>
void silu_backward_cpu(T* dx, const T* dy, const T* x, int64_t n) {
  unary_backward_cpu<SiluCpu>(dx, dy, x, n);
}
template <typename T>
void sigmoid_forward_cpu(T* y, const T* x, int64_t n) {
  unary_forward_cpu<SigmoidCpu>(y, x, n);
}
template <typename T>
void sigmoid_backward_cpu(T* dx, const T* dy, const T* y, int64_t n) {
  unary_backward_cpu<SigmoidCpu>(dx, dy, y, n);
}
#define HT_INSTANTIATE(T)                                                   \
  template void silu_forward_cpu<T>(T*, const T*, int64_t);                 \
  template void silu_backward_cpu<T>(T*, const T*, const T*, int64_t);      \
  template void sigmoid_forward_cpu<T>(T*, const T*, int64_t);              \
  template void sigmoid_backward_cpu<T>(T*, const T*, const T*, int64_t);
HT_INSTANTIATE(float)
HT_INSTANTIATE(double)
#undef HT_INSTANTIATE

}  // namespace hetrain::ops
