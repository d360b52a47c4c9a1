// nn/linear.cpp — fully connected layer over ops::linear_* (any device).
#include "nn/linear.hpp"

#include "hetrain/error.hpp"

namespace hetrain::nn {

Linear::Linear(ParamBuffer& pb, const std::string& name, int in_features, int out_features)
    : pb_(&pb), name_(name), I_(in_features), O_(out_features) {
  w_ = pb.declare(name + ".weight", {O_, I_}, ParamKind::LinearWeight);
  b_ = pb.declare(name + ".bias", {O_}, ParamKind::Bias);
}

Tensor Linear::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 2 && x.dim(1) == I_, name_, ": expected input [N, ", I_, "], got ", shape_str(x.shape()));
  x_ = x;
  y_shape_ = {x.dim(0), O_};
  Tensor y = buffer(y_, y_shape_, x.device());
  ops::linear_forward(y, x, pb_->param(w_), pb_->param(b_), options());
  return y;
}

Tensor Linear::backward(const Tensor& dy) {
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == y_shape_, name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  Tensor dx;
  if (need_dx_) dx = buffer(dx_, x_.shape(), x_.device());
  ops::linear_backward(dx, pb_->grad(w_), pb_->grad(b_), dy, x_, pb_->param(w_), options());
  x_ = Tensor();
  return dx;
}

ops::LinearOptions Linear::options() const {
  ops::LinearOptions o;
  o.precision = precision();
  return o;
}

}  // namespace hetrain::nn
