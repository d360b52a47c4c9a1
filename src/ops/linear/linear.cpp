// ops/linear/linear.cpp — the dense layer's entry points and CPU slot (cpu::linear_*).
#include "ops/linear/linear.hpp"

#include <chrono>
#include <string>

#include "hetrain/op_profile.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops {

Dispatch<LinearForwardFn> linear_forward_impl("linear_forward");
Dispatch<LinearBackwardFn> linear_backward_impl("linear_backward");

namespace {
void linear_forward_cpu(float* y, const float* x, const float* w, const float* b, int N, int I, int O, Precision) {
  cpu::linear_forward(y, x, w, b, N, I, O);
}
void linear_backward_cpu(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w, int N,
                         int I, int O, Precision) {
  cpu::linear_backward(dx, dw, db, dy, x, w, N, I, O);
}

float* data_or_null(const Tensor& t) { return t.defined() ? t.data() : nullptr; }

// hetrain/op_profile.hpp
void profile(const char* pass, int I, int O, std::chrono::steady_clock::time_point start, double flops) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  op_profile_add("linear " + std::to_string(I) + "->" + std::to_string(O) + " " + pass, s, flops);
}
}  // namespace

HT_OP_IMPLEMENTATION(linear_forward_impl, Device::CPU, linear_forward_cpu);
HT_OP_IMPLEMENTATION(linear_backward_impl, Device::CPU, linear_backward_cpu);

void linear_forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const LinearOptions& o) {
  HT_CHECK(x.ndim() == 2 && w.ndim() == 2 && x.dim(1) == w.dim(1), "linear_forward: input ", shape_str(x.shape()),
           " does not fit weight ", shape_str(w.shape()));
  const int N = int(x.dim(0)), I = int(x.dim(1)), O = int(w.dim(0));
  check_shape("linear_forward", "output", y, {N, O});
  if (b.defined()) check_shape("linear_forward", "bias", b, {O});
  const Device d = common_device("linear_forward", {&y, &x, &w, &b});
  const bool profiling = op_profiling();
  const auto start = std::chrono::steady_clock::now();
  linear_forward_impl.on(d)(y.data(), x.data(), w.data(), data_or_null(b), N, I, O, o.precision);
  if (profiling) profile("forward", I, O, start, 2.0 * N * double(I) * O);
}

void linear_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                     const Tensor& w, const LinearOptions& o) {
  const int N = int(x.dim(0)), I = int(x.dim(1)), O = int(w.dim(0));
  check_shape("linear_backward", "output gradient", dy, {N, O});
  check_shape("linear_backward", "weight gradient", dw, w.shape());
  if (dx.defined()) check_shape("linear_backward", "input gradient", dx, x.shape());
  if (db.defined()) check_shape("linear_backward", "bias gradient", db, {O});
  const Device d = common_device("linear_backward", {&dx, &dw, &db, &dy, &x, &w});
  const bool profiling = op_profiling();
  const auto start = std::chrono::steady_clock::now();
  linear_backward_impl.on(d)(data_or_null(dx), dw.data(), data_or_null(db), dy.data(), x.data(), w.data(), N, I, O,
                             o.precision);
  if (profiling) profile("backward", I, O, start, 2.0 * N * double(I) * O * (dx.defined() ? 2.0 : 1.0));
}

}  // namespace hetrain::ops
