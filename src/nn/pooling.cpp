// nn/pooling.cpp — pooling layers over cpu::*pool* ops, or cuda::*pool* (cuDNN and our kernel) on the GPU.
#include "nn/pooling.hpp"

#include "hetrain/cuda.hpp"
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
  Tensor y = buffer(y_, {g.N, g.C, g.P(), g.Q()}, x.device());
  y_shape_ = y.shape();
  if (x.device() == Device::CUDA) {
    cuda::maxpool2d_forward(y.data(), x.data(), g, nullptr);
    if (need_dx_) x_ = x, out_ = y;
  } else {
    argmax_.resize(static_cast<size_t>(y.numel()));
    cpu::maxpool2d_forward(y.data(), argmax_.data(), x.data(), g);
  }
  return y;
}

Tensor MaxPool2d::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "maxpool: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  const cpu::Pool2dGeom g = pool_geom(in_shape_, kernel_, stride_, pad_);
  Tensor dx = buffer(dx_, in_shape_, dy.device());
  if (dy.device() == Device::CUDA) {
    HT_CHECK(x_.defined(), "maxpool: backward without a forward (each forward allows one backward)");
    cuda::maxpool2d_backward(dx.data(), dy.data(), out_.data(), x_.data(), g, nullptr);
    x_ = out_ = Tensor();
  } else {
    cpu::maxpool2d_backward(dx.data(), dy.data(), argmax_.data(), g);
  }
  return dx;
}

Tensor AvgPool2d::forward(const Tensor& x, bool) {
  const cpu::Pool2dGeom g = pool_geom(x.shape(), kernel_, stride_, pad_);
  in_shape_ = x.shape();
  Tensor y = buffer(y_, {g.N, g.C, g.P(), g.Q()}, x.device());
  y_shape_ = y.shape();
  if (x.device() == Device::CUDA) {
    cuda::avgpool2d_forward(y.data(), x.data(), g, nullptr);
    if (need_dx_) x_ = x;
  } else {
    cpu::avgpool2d_forward(y.data(), x.data(), g);
  }
  return y;
}

Tensor AvgPool2d::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "avgpool: gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  const cpu::Pool2dGeom g = pool_geom(in_shape_, kernel_, stride_, pad_);
  Tensor dx = buffer(dx_, in_shape_, dy.device());
  if (dy.device() == Device::CUDA) {
    HT_CHECK(x_.defined(), "avgpool: backward without a forward (each forward allows one backward)");
    cuda::avgpool2d_backward(dx.data(), dy.data(), x_.data(), g, nullptr);
    x_ = Tensor();
  } else {
    cpu::avgpool2d_backward(dx.data(), dy.data(), g);
  }
  return dx;
}

Tensor GlobalAvgPool::forward(const Tensor& x, bool) {
  HT_CHECK(x.ndim() == 4, "global avgpool: expected input [N, C, H, W], got ", shape_str(x.shape()));
  in_shape_ = x.shape();
  Tensor y = buffer(y_, {x.dim(0), x.dim(1)}, x.device());
  y_shape_ = y.shape();
  const int N = int(x.dim(0)), C = int(x.dim(1)), HW = int(x.dim(2) * x.dim(3));
  if (x.device() == Device::CUDA)
    cuda::global_avgpool_forward(y.data(), x.data(), N, C, HW, nullptr);
  else
    cpu::global_avgpool_forward(y.data(), x.data(), N, C, HW);
  return y;
}

Tensor GlobalAvgPool::backward(const Tensor& dy) {
  HT_CHECK(dy.shape() == y_shape_, "global avgpool: gradient ", shape_str(dy.shape()),
           " does not match output ", shape_str(y_shape_));
  if (!need_dx_) return Tensor();
  Tensor dx = buffer(dx_, in_shape_, dy.device());
  const int N = int(in_shape_[0]), C = int(in_shape_[1]), HW = int(in_shape_[2] * in_shape_[3]);
  if (dy.device() == Device::CUDA)
    cuda::global_avgpool_backward(dx.data(), dy.data(), N, C, HW, nullptr);
  else
    cpu::global_avgpool_backward(dx.data(), dy.data(), N, C, HW);
  return dx;
}

}  // namespace hetrain::nn
