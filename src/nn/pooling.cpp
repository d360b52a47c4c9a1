// nn/pooling.cpp — pooling layers over ops::*pool* (any device).
#include "nn/pooling.hpp"

#include "hetrain/error.hpp"

namespace hetrain::nn {

Tensor MaxPool2d::forward(const Tensor& x, bool) {
  in_shape_ = x.shape();
  Tensor y = buffer(y_, ops::pool_output_shape("maxpool", x.shape(), window()), x.device());
  y_shape_ = y.shape();
  ops::maxpool2d_forward(y, x, window(), saved_, need_dx_);
  return y;
}

Tensor MaxPool2d::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "maxpool: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  HT_CHECK(saved_.valid, "maxpool: backward without a forward (each forward allows one backward)");
  Tensor dx = buffer(dx_, in_shape_, dy.device());
  ops::maxpool2d_backward(dx, dy, saved_);
  return dx;
}

Tensor AvgPool2d::forward(const Tensor& x, bool) {
  in_shape_ = x.shape();
  Tensor y = buffer(y_, ops::pool_output_shape("avgpool", x.shape(), window()), x.device());
  y_shape_ = y.shape();
  ops::avgpool2d_forward(y, x, window());
  if (need_dx_) x_ = x;
  return y;
}

Tensor AvgPool2d::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "avgpool: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  HT_CHECK(x_.defined(), "avgpool: backward without a forward (each forward allows one backward)");
  Tensor dx = buffer(dx_, in_shape_, dy.device());
  ops::avgpool2d_backward(dx, dy, x_, window());
  x_ = Tensor();
  return dx;
}

Tensor GlobalAvgPool::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 4, "global avgpool: expected input [N, C, H, W], got ", shape_str(x.shape()));
  in_shape_ = x.shape();
  Tensor y = buffer(y_, {x.dim(0), x.dim(1)}, x.device());
  y_shape_ = y.shape();
  ops::global_avgpool_forward(y, x);
  return y;
}

Tensor GlobalAvgPool::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "global avgpool: gradient ", shape_str(dy.shape()),
           " does not match output ", shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  Tensor dx = buffer(dx_, in_shape_, dy.device());
  ops::global_avgpool_backward(dx, dy);
  return dx;
}

}  // namespace hetrain::nn
