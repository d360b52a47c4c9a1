// ops/common/unary.cpp — the checked entry points every element-wise op of one input shares.
#include "ops/common/unary.hpp"
#include "hetrain/op_profile.hpp"

namespace hetrain::ops {

void UnaryOp::forward(const Tensor& y, const Tensor& x) const {
  const char* op = forward_impl.name();
  OpProfileScope profile(op);
  check_shape(op, "output", y, x.shape());
  forward_impl.on(common_device(op, {&y, &x}))(y.data(), x.data(), x.numel());
}

void UnaryOp::backward(const Tensor& dx, const Tensor& dy, const Tensor& saved) const {
  const char* op = backward_impl.name();
  OpProfileScope profile(op);
  check_shape(op, "input gradient", dx, dy.shape());
  check_shape(op, saved_ == Saved::Input ? "saved input" : "saved output", saved, dy.shape());
  backward_impl.on(common_device(op, {&dx, &dy, &saved}))(dx.data(), dy.data(), saved.data(), dy.numel());
}

}  // namespace hetrain::ops
