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
  ensure_shape(y_, {g.N, K_, g.P(), g.Q()});
  const float* bias = b_ >= 0 ? pb_->param(b_).data() : nullptr;
  cpu::conv2d_forward(y_.data(), x.data(), pb_->param(w_).data(), bias, g, ws_->get(cpu::conv2d_workspace_size(g)));
  return y_;
}

Tensor Conv2d::backward(const Tensor& dy) {
  const cpu::Conv2dGeom g = geom_of(x_, K_, kernel_, stride_, pad_);
  HT_CHECK(dy.shape() == y_.shape(), name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_.shape()));
  float* dx = nullptr;
  if (need_dx_) dx = ensure_shape(dx_, x_.shape()).data();
  float* db = b_ >= 0 ? pb_->grad(b_).data() : nullptr;
  cpu::conv2d_backward(dx, pb_->grad(w_).data(), db, dy.data(), x_.data(), pb_->param(w_).data(), g,
                       ws_->get(cpu::conv2d_workspace_size(g)));
  return need_dx_ ? dx_ : Tensor();
}

}  // namespace hetrain::nn
