// ops/add/add.cpp — the element-wise sums' entry points and CPU implementations.
#include "ops/add/add.hpp"

#include "hetrain/op_profile.hpp"
#include "ops/common/for_slices.hpp"
#include "ops/common/vector_clones.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops {

Dispatch<AddFn> add_impl("add");
Dispatch<AccumulateFn> accumulate_impl("accumulate");
Dispatch<AddFn> add_relu_impl("add_relu");

namespace {
HT_VECTOR_CLONES void add_relu_slice(float* y, const float* a, const float* b, int64_t begin, int64_t end) {
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float v = a[i] + b[i];
    y[i] = v <= 0.0f ? 0.0f : v;  // a NaN sum stays NaN, as relu's
  }
}
// One pass instead of an add and a ReLU: the residual block's output is the largest tensor it writes.
void add_relu_cpu(float* y, const float* a, const float* b, int64_t n) {
  cpu::for_slices(n, [&](int64_t begin, int64_t end) { add_relu_slice(y, a, b, begin, end); });
}

void check_binary(const char* op, const Tensor& y, const Tensor& a, const Tensor& b) {
  check_shape(op, "output", y, a.shape());
  check_shape(op, "second operand", b, a.shape());
}
}  // namespace

HT_OP_IMPLEMENTATION(add_impl, Device::CPU, cpu::add_forward<float>);
HT_OP_IMPLEMENTATION(accumulate_impl, Device::CPU, cpu::accumulate<float>);
HT_OP_IMPLEMENTATION(add_relu_impl, Device::CPU, add_relu_cpu);

void add(const Tensor& y, const Tensor& a, const Tensor& b) {
  OpProfileScope profile("add");
  check_binary("add", y, a, b);
  add_impl.on(common_device("add", {&y, &a, &b}))(y.data(), a.data(), b.data(), a.numel());
}

void accumulate(const Tensor& acc, const Tensor& x) {
  OpProfileScope profile("accumulate");
  check_shape("accumulate", "addend", x, acc.shape());
  accumulate_impl.on(common_device("accumulate", {&acc, &x}))(acc.data(), x.data(), x.numel());
}

void add_relu(const Tensor& y, const Tensor& a, const Tensor& b) {
  OpProfileScope profile("add_relu");
  check_binary("add_relu", y, a, b);
  add_relu_impl.on(common_device("add_relu", {&y, &a, &b}))(y.data(), a.data(), b.data(), a.numel());
}

}  // namespace hetrain::ops
