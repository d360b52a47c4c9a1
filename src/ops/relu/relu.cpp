// ops/relu/relu.cpp — ReLU's entry points and its CPU implementation (cpu::relu_*).
#include "ops/relu/relu.hpp"

#include "hetrain/ops.hpp"

namespace hetrain::ops {

Dispatch<ReluFn> relu_forward_impl("relu_forward");
Dispatch<ReluBackwardFn> relu_backward_impl("relu_backward");
HT_OP_IMPLEMENTATION(relu_forward_impl, Device::CPU, cpu::relu_forward<float>);
HT_OP_IMPLEMENTATION(relu_backward_impl, Device::CPU, cpu::relu_backward<float>);

void relu_forward(const Tensor& y, const Tensor& x) {
  check_shape("relu_forward", "output", y, x.shape());
  relu_forward_impl.on(common_device("relu_forward", {&y, &x}))(y.data(), x.data(), x.numel());
}

void relu_backward(const Tensor& dx, const Tensor& dy, const Tensor& y) {
  check_shape("relu_backward", "input gradient", dx, dy.shape());
  check_shape("relu_backward", "saved output", y, dy.shape());
  relu_backward_impl.on(common_device("relu_backward", {&dx, &dy, &y}))(dx.data(), dy.data(), y.data(), dy.numel());
}

}  // namespace hetrain::ops
