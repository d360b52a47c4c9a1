// nn/unary_layer.cpp — element-wise layers over their ops (any device).
#include "nn/unary_layer.hpp"

#include "hetrain/error.hpp"
#include "ops/relu/relu.hpp"
#include "ops/silu/silu.hpp"

namespace hetrain::nn {

Tensor UnaryLayer::forward(const Tensor& x, bool) {
  Tensor y = buffer(y_, x.shape(), x.device());
  op_.forward(y, x);
  saved_ = op_.saved() == ops::UnaryOp::Saved::Input ? x : y;
  return y;
}

Tensor UnaryLayer::backward(const Tensor& dy) {
  HT_CHECK(saved_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == saved_.shape(), name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(saved_.shape()));
  Tensor dx;
  if (need_dx_) {
    dx = buffer(dx_, dy.shape(), dy.device());
    op_.backward(dx, dy, saved_);
  }
  saved_ = Tensor();  // a pooled buffer is free for reuse; an own one stays in y_ for the next forward
  return dx;
}

ReLU::ReLU() : UnaryLayer(ops::relu_op, "ReLU") {}
SiLU::SiLU() : UnaryLayer(ops::silu_op, "SiLU") {}

}  // namespace hetrain::nn
