// ops/silu/silu.cpp — SiLU and sigmoid on the CPU, and their Tensor-level entry points.
//
// Compiled without trapping math: with it GCC keeps the clamps of cpu::exp_vectorizable as branches and
// the loops stay scalar (3× slower). hetrain never reads floating-point exception flags, and the option
// does not change any computed value.
#pragma GCC optimize("no-trapping-math")
#include "ops/silu/silu.hpp"

#include <cmath>

#include "cpu/fast_exp.hpp"
#include "cpu/for_slices.hpp"
#include "cpu/vector_clones.hpp"

namespace hetrain::ops {

Dispatch<UnaryFn> silu_forward_impl("silu_forward");
Dispatch<UnaryBackwardFn> silu_backward_impl("silu_backward");
Dispatch<UnaryFn> sigmoid_forward_impl("sigmoid_forward");
Dispatch<UnaryBackwardFn> sigmoid_backward_impl("sigmoid_backward");

namespace {
// 1 / (1 + e^−x): 0 and 1 at the ends. The float exp is one the loops below can vectorise (SiLU runs after
// every convolution of a YOLO model: a scalar exp made it a large share of the step).
template <typename T>
inline T logistic(T x) {
  return T(1) / (T(1) + cpu::exp_vectorizable(-x));
}

template <typename T>
HT_VECTOR_CLONES void silu_slice(T* y, const T* x, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = x[i] * logistic(x[i]);
}
template <typename T>
HT_VECTOR_CLONES void silu_backward_slice(T* dx, const T* dy, const T* x, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T s = logistic(x[i]);
    dx[i] = dy[i] * s * (T(1) + x[i] * (T(1) - s));
  }
}
template <typename T>
HT_VECTOR_CLONES void sigmoid_slice(T* y, const T* x, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) y[i] = logistic(x[i]);
}
template <typename T>
HT_VECTOR_CLONES void sigmoid_backward_slice(T* dx, const T* dy, const T* y, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
}

void check_unary(const char* op, const Tensor& out, const Tensor& in) {
  check_shape(op, "output", out, in.shape());
  common_device(op, {&out, &in});
}
}  // namespace

template <typename T>
void silu_forward_cpu(T* y, const T* x, int64_t n) {
  cpu::for_slices(n, [&](int64_t b, int64_t e) { silu_slice(y, x, b, e); });
}
template <typename T>
void silu_backward_cpu(T* dx, const T* dy, const T* x, int64_t n) {
  cpu::for_slices(n, [&](int64_t b, int64_t e) { silu_backward_slice(dx, dy, x, b, e); });
}
template <typename T>
void sigmoid_forward_cpu(T* y, const T* x, int64_t n) {
  cpu::for_slices(n, [&](int64_t b, int64_t e) { sigmoid_slice(y, x, b, e); });
}
template <typename T>
void sigmoid_backward_cpu(T* dx, const T* dy, const T* y, int64_t n) {
  cpu::for_slices(n, [&](int64_t b, int64_t e) { sigmoid_backward_slice(dx, dy, y, b, e); });
}
template void silu_forward_cpu<float>(float*, const float*, int64_t);
template void silu_forward_cpu<double>(double*, const double*, int64_t);
template void silu_backward_cpu<float>(float*, const float*, const float*, int64_t);
template void silu_backward_cpu<double>(double*, const double*, const double*, int64_t);
template void sigmoid_forward_cpu<float>(float*, const float*, int64_t);
template void sigmoid_forward_cpu<double>(double*, const double*, int64_t);
template void sigmoid_backward_cpu<float>(float*, const float*, const float*, int64_t);
template void sigmoid_backward_cpu<double>(double*, const double*, const double*, int64_t);

HT_OP_IMPLEMENTATION(silu_forward_impl, Device::CPU, silu_forward_cpu<float>);
HT_OP_IMPLEMENTATION(silu_backward_impl, Device::CPU, silu_backward_cpu<float>);
HT_OP_IMPLEMENTATION(sigmoid_forward_impl, Device::CPU, sigmoid_forward_cpu<float>);
HT_OP_IMPLEMENTATION(sigmoid_backward_impl, Device::CPU, sigmoid_backward_cpu<float>);

void silu_forward(const Tensor& y, const Tensor& x) {
  check_unary("silu_forward", y, x);
  silu_forward_impl.on(x.device())(y.data(), x.data(), x.numel());
}
void silu_backward(const Tensor& dx, const Tensor& dy, const Tensor& x) {
  check_unary("silu_backward", dx, dy);
  check_shape("silu_backward", "saved input", x, dy.shape());
  common_device("silu_backward", {&dx, &dy, &x});
  silu_backward_impl.on(x.device())(dx.data(), dy.data(), x.data(), x.numel());
}
void sigmoid_forward(const Tensor& y, const Tensor& x) {
  check_unary("sigmoid_forward", y, x);
  sigmoid_forward_impl.on(x.device())(y.data(), x.data(), x.numel());
}
void sigmoid_backward(const Tensor& dx, const Tensor& dy, const Tensor& y) {
  check_unary("sigmoid_backward", dx, dy);
  check_shape("sigmoid_backward", "saved output", y, dy.shape());
  common_device("sigmoid_backward", {&dx, &dy, &y});
  sigmoid_backward_impl.on(y.device())(dx.data(), dy.data(), y.data(), y.numel());
}

}  // namespace hetrain::ops
