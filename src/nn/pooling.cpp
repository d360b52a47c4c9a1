// nn/pooling.cpp — pooling layers over cpu::*pool* ops.
#include "nn/pooling.hpp"

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::nn {

namespace {
cpu::Pool2dGeom pool_geom(const Shape& s, int kernel, int stride, int pad) {
  HT_CHECK(s.size() == 4, "pooling: expected input [N, C, H, W], got ", shape_str(s));
  cpu::Pool2dGeom g;
  g.N = int(s[0]), g.C = int(s[1]), g.H = int(s[2]), g.W = int(s[3]);
  g.kernel = kernel, g.stride = stride, g.pad = pad;
  HT_CHECK(g.P() > 0 && g.Q() > 0, "pooling: input ", shape_str(s), " is too small for a ", kernel, "×", kernel,
           " window");
  return g;
}
}  // namespace

Tensor MaxPool2d::forward(const Tensor& x, bool) {
  const cpu::Pool2dGeom g = pool_geom(x.shape(), kernel_, stride_, pad_);
  in_shape_ = x.shape();
  Tensor y = buffer(y_, {g.N, g.C, g.P(), g.Q()});
  y_shape_ = y.shape();
  argmax_.resize(static_cast<size_t>(y.numel()));
  cpu::maxpool2d_forward(y.data(), argmax_.data(), x.data(), g);
  return y;
}

Tensor MaxPool2d::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "maxpool: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  const cpu::Pool2dGeom g = pool_geom(in_shape_, kernel_, stride_, pad_);
  Tensor dx = buffer(dx_, in_shape_);
  cpu::maxpool2d_backward(dx.data(), dy.data(), argmax_.data(), g);
  return dx;
}

Tensor AvgPool2d::forward(const Tensor& x, bool) {
  const cpu::Pool2dGeom g = pool_geom(x.shape(), kernel_, stride_, pad_);
  in_shape_ = x.shape();
  Tensor y = buffer(y_, {g.N, g.C, g.P(), g.Q()});
  y_shape_ = y.shape();
  cpu::avgpool2d_forward(y.data(), x.data(), g);
  return y;
}

Tensor AvgPool2d::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "avgpool: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  const cpu::Pool2dGeom g = pool_geom(in_shape_, kernel_, stride_, pad_);
  Tensor dx = buffer(dx_, in_shape_);
  cpu::avgpool2d_backward(dx.data(), dy.data(), g);
  return dx;
}

Tensor GlobalAvgPool::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 4, "global avgpool: expected input [N, C, H, W], got ", shape_str(x.shape()));
  in_shape_ = x.shape();
  Tensor y = buffer(y_, {x.dim(0), x.dim(1)});
  y_shape_ = y.shape();
  cpu::global_avgpool_forward(y.data(), x.data(), int(x.dim(0)), int(x.dim(1)), int(x.dim(2) * x.dim(3)));
  return y;
}

Tensor GlobalAvgPool::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "global avgpool: gradient ", shape_str(dy.shape()),
           " does not match output ", shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  Tensor dx = buffer(dx_, in_shape_);
  cpu::global_avgpool_backward(dx.data(), dy.data(), int(in_shape_[0]), int(in_shape_[1]),
                               int(in_shape_[2] * in_shape_[3]));
  return dx;
}

}  // namespace hetrain::nn
