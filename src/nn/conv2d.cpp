// nn/conv2d.cpp — convolution layer over cpu::conv2d_{forward,backward} (im2col + GEMM).
#include "nn/conv2d.hpp"

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::nn {

Conv2d::Conv2d(ParamBuffer& pb, const std::string& name, int in_channels, int out_channels, int kernel,
               int stride, int pad, bool bias, Workspace* ws)
    : pb_(&pb), name_(name), C_(in_channels), K_(out_channels), kernel_(kernel), stride_(stride), pad_(pad),
      ws_(ws) {
  w_ = pb.declare(name + ".weight", {K_, C_, kernel_, kernel_}, ParamKind::ConvWeight);
  if (bias) b_ = pb.declare(name + ".bias", {K_}, ParamKind::Bias);
}

static cpu::Conv2dGeom geom_of(const Tensor& x, int K, int kernel, int stride, int pad) {
  cpu::Conv2dGeom g;
  g.N = int(x.dim(0)), g.C = int(x.dim(1)), g.H = int(x.dim(2)), g.W = int(x.dim(3));
  g.K = K, g.R = kernel, g.S = kernel, g.stride = stride, g.pad = pad;
  return g;
}

Tensor Conv2d::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 4 && x.dim(1) == C_, name_, ": expected input [N, ", C_, ", H, W], got ",
           shape_str(x.shape()));
  const cpu::Conv2dGeom g = geom_of(x, K_, kernel_, stride_, pad_);
  HT_CHECK(g.P() > 0 && g.Q() > 0, name_, ": input ", shape_str(x.shape()), " is too small for a ", kernel_, "×",
           kernel_, " kernel");
  x_ = x;
  y_shape_ = {g.N, K_, g.P(), g.Q()};
  Tensor y = buffer(y_, y_shape_);
  const float* bias = b_ >= 0 ? pb_->param(b_).data() : nullptr;
  cpu::conv2d_forward(y.data(), x.data(), pb_->param(w_).data(), bias, g, ws_->get(cpu::conv2d_workspace_size(g)));
  return y;
}

Tensor Conv2d::backward(const Tensor& dy) {
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  const cpu::Conv2dGeom g = geom_of(x_, K_, kernel_, stride_, pad_);
  HT_CHECK(dy.shape() == y_shape_, name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  Tensor dx;
  if (need_dx_) dx = buffer(dx_, x_.shape());
  float* db = b_ >= 0 ? pb_->grad(b_).data() : nullptr;
  cpu::conv2d_backward(dx.data(), pb_->grad(w_).data(), db, dy.data(), x_.data(), pb_->param(w_).data(), g,
                       ws_->get(cpu::conv2d_workspace_size(g)));
  x_ = Tensor();
  return dx;
}

}  // namespace hetrain::nn
