// nn/conv2d.cpp — convolution layer: cpu::conv2d_{forward,backward} (im2col + GEMM) on the CPU,
// cuda::CudnnConv2d on the GPU.
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

static bool same_geom(const cpu::Conv2dGeom& a, const cpu::Conv2dGeom& b) {
  return a.N == b.N && a.C == b.C && a.H == b.H && a.W == b.W && a.K == b.K && a.R == b.R && a.S == b.S &&
         a.stride == b.stride && a.pad == b.pad;
}

cuda::CudnnConv2d& Conv2d::cudnn_for(const cpu::Conv2dGeom& g) {
  if (!cudnn_ || !same_geom(g, cudnn_geom_)) {
    cudnn_.reset();  // free the old workspace before the new one is allocated
    cuda::CudnnConvOptions options;
    options.allow_tf32 = allow_tf32();
    cudnn_ = std::make_unique<cuda::CudnnConv2d>(g, options);
    cudnn_geom_ = g;
  }
  return *cudnn_;
}

Tensor Conv2d::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 4 && x.dim(1) == C_, name_, ": expected input [N, ", C_, ", H, W], got ",
           shape_str(x.shape()));
  const cpu::Conv2dGeom g = geom_of(x, K_, kernel_, stride_, pad_);
  HT_CHECK(g.P() > 0 && g.Q() > 0, name_, ": input ", shape_str(x.shape()), " is too small for a ", kernel_, "×",
           kernel_, " kernel");
  x_ = x;
  y_shape_ = {g.N, K_, g.P(), g.Q()};
  Tensor y = buffer(y_, y_shape_, x.device());
  const float* bias = b_ >= 0 ? pb_->param(b_).data() : nullptr;
  if (x.device() == Device::CUDA)
    cudnn_for(g).forward(y.data(), x.data(), pb_->param(w_).data(), bias, nullptr);
  else
    cpu::conv2d_forward(y.data(), x.data(), pb_->param(w_).data(), bias, g, ws_->get(cpu::conv2d_workspace_size(g)));
  return y;
}

Tensor Conv2d::backward(const Tensor& dy) {
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  const cpu::Conv2dGeom g = geom_of(x_, K_, kernel_, stride_, pad_);
  HT_CHECK(dy.shape() == y_shape_, name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  Tensor dx;
  if (need_dx_) dx = buffer(dx_, x_.shape(), x_.device());
  float* db = b_ >= 0 ? pb_->grad(b_).data() : nullptr;
  if (x_.device() == Device::CUDA)
    cudnn_for(g).backward(dx.data(), pb_->grad(w_).data(), db, dy.data(), x_.data(), pb_->param(w_).data(), nullptr);
  else
    cpu::conv2d_backward(dx.data(), pb_->grad(w_).data(), db, dy.data(), x_.data(), pb_->param(w_).data(), g,
                         ws_->get(cpu::conv2d_workspace_size(g)));
  x_ = Tensor();
  return dx;
}

}  // namespace hetrain::nn
