// nn/conv2d.cpp — convolution layer over ops::Conv2dOp (any device).
#include "nn/conv2d.hpp"

#include "hetrain/error.hpp"

namespace hetrain::nn {

Conv2d::Conv2d(ParamBuffer& pb, const std::string& name, int in_channels, int out_channels, int kernel,
               int stride, int pad, bool bias, Workspace* ws)
    : pb_(&pb), name_(name), C_(in_channels), K_(out_channels), kernel_(kernel), ws_(ws),
      conv_(out_channels, kernel, stride, pad) {
  w_ = pb.declare(name + ".weight", {K_, C_, kernel_, kernel_}, ParamKind::ConvWeight);
  if (bias) b_ = pb.declare(name + ".bias", {K_}, ParamKind::Bias);
}

ops::Conv2dOptions Conv2d::options() const {
  ops::Conv2dOptions o;
  o.precision = precision();
  o.scratch = &ws_->scratch();
  return o;
}

Tensor Conv2d::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 4 && x.dim(1) == C_, name_, ": expected input [N, ", C_, ", H, W], got ",
           shape_str(x.shape()));
  const Conv2dGeom g = conv_.geom(name_.c_str(), x.shape());
  x_ = x;
  y_shape_ = {g.N, K_, g.P(), g.Q()};
  Tensor y = buffer(y_, y_shape_, x.device());
  conv_.forward(y, x, pb_->param(w_), b_ >= 0 ? pb_->param(b_) : Tensor(), options());
  return y;
}

Tensor Conv2d::backward(const Tensor& dy) {
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == y_shape_, name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  Tensor dx;
  if (need_dx_) dx = buffer(dx_, x_.shape(), x_.device());
  conv_.backward(dx, pb_->grad(w_), b_ >= 0 ? pb_->grad(b_) : Tensor(), dy, x_, pb_->param(w_), options());
  x_ = Tensor();
  return dx;
}

}  // namespace hetrain::nn
