// nn/relu.cpp — ReLU over ops::relu_* (any device).
#include "nn/relu.hpp"

#include "hetrain/error.hpp"
#include "ops/relu/relu.hpp"

namespace hetrain::nn {

Tensor ReLU::forward(const Tensor& x, bool) {
  y_ = buffer(y_, x.shape(), x.device());
  ops::relu_forward(y_, x);
  return y_;
}

Tensor ReLU::backward(const Tensor& dy) {
  HT_CHECK(y_.defined(), "relu: backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == y_.shape(), "relu: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_.shape()));
  Tensor dx;
  if (need_dx_) {
    dx = buffer(dx_, dy.shape(), dy.device());
    ops::relu_backward(dx, dy, y_);
  }
  if (pool_) y_ = Tensor();  // pooled: free for reuse; own buffer: kept for the next forward
  return dx;
}

}  // namespace hetrain::nn
