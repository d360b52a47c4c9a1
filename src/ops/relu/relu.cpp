// ops/relu/relu.cpp — ReLU's entry points and CPU implementation (also cpu::relu_* of hetrain/ops.hpp).
#include "ops/relu/relu.hpp"

#include "hetrain/ops.hpp"
#include "ops/common/unary_cpu.hpp"

namespace hetrain::ops {
namespace {
// Written so that a NaN takes the branch that keeps it, as PyTorch does: relu(NaN) = NaN (clamp_min), and
// the backward is threshold_backward, y <= 0 ? 0 : dy, which passes dy where y is NaN. `x > 0 ? x : 0`
// would turn NaN into 0 (test/support/nan_rules.hpp).
struct ReluCpu {
  template <typename T>
  T operator()(T x) const {
    return x <= T(0) ? T(0) : x;
  }
  template <typename T>
  T operator()(T dy, T y) const {
    return y <= T(0) ? T(0) : dy;
  }
};
}  // namespace

UnaryOp relu_op("relu_forward", "relu_backward", UnaryOp::Saved::Output);
HT_UNARY_CPU(relu_op, ReluCpu);

void relu_forward(const Tensor& y, const Tensor& x) { relu_op.forward(y, x); }
void relu_backward(const Tensor& dx, const Tensor& dy, const Tensor& y) { relu_op.backward(dx, dy, y); }

}  // namespace hetrain::ops

namespace hetrain::ops::cpu {
template <typename T>
void relu_forward(T* out, const T* in, int64_t n) {
  ops::unary_forward_cpu<ops::ReluCpu>(out, in, n);
}
template <typename T>
void relu_backward(T* din, const T* dout, const T* out, int64_t n) {
  ops::unary_backward_cpu<ops::ReluCpu>(din, dout, out, n);
}
template void relu_forward<float>(float*, const float*, int64_t);
template void relu_forward<double>(double*, const double*, int64_t);
template void relu_backward<float>(float*, const float*, const float*, int64_t);
template void relu_backward<double>(double*, const double*, const double*, int64_t);
}  // namespace hetrain::ops::cpu
