// nn/linear.cpp — fully connected layer over cpu::linear_{forward,backward} or cuda::linear_* (cuBLAS).
#include "nn/linear.hpp"

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

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
  const float *w = pb_->param(w_).data(), *b = pb_->param(b_).data();
  if (x.device() == Device::CUDA)
    cuda::linear_forward(y.data(), x.data(), w, b, int(x.dim(0)), I_, O_, nullptr, allow_tf32());
  else
    cpu::linear_forward(y.data(), x.data(), w, b, int(x.dim(0)), I_, O_);
  return y;
}

Tensor Linear::backward(const Tensor& dy) {
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == y_shape_, name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(y_shape_));
  Tensor dx;
  if (need_dx_) dx = buffer(dx_, x_.shape(), x_.device());
  float *dw = pb_->grad(w_).data(), *db = pb_->grad(b_).data();
  if (x_.device() == Device::CUDA)
    cuda::linear_backward(dx.data(), dw, db, dy.data(), x_.data(), pb_->param(w_).data(), int(x_.dim(0)), I_, O_, nullptr,
                          allow_tf32());
  else
    cpu::linear_backward(dx.data(), dw, db, dy.data(), x_.data(), pb_->param(w_).data(), int(x_.dim(0)), I_, O_);
  x_ = Tensor();
  return dx;
}

}  // namespace hetrain::nn
