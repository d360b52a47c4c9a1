// nn/relu.cpp
#include "nn/relu.hpp"

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::nn {

Tensor ReLU::forward(const Tensor& x, bool) {
  ensure_shape(y_, x.shape());
  cpu::relu_forward(y_.data(), x.data(), x.numel());
  return y_;
}

Tensor ReLU::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_.shape(), "relu: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_.shape()));
  if (!need_dx_) return Tensor();
  ensure_shape(dx_, dy.shape());
  cpu::relu_backward(dx_.data(), dy.data(), y_.data(), dy.numel());
  return dx_;
}

}  // namespace hetrain::nn
