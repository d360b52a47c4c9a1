// nn/batchnorm2d.cpp — batch-norm layer over cpu::batchnorm_* or cuda::batchnorm_* (cuDNN), same contract.
#include "nn/batchnorm2d.hpp"

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::nn {

BatchNorm2d::BatchNorm2d(ParamBuffer& pb, const std::string& name, int channels, float momentum, float eps)
    : pb_(&pb), name_(name), C_(channels), momentum_(momentum), eps_(eps) {
  gamma_ = pb.declare(name + ".weight", {C_}, ParamKind::BnWeight);
  beta_ = pb.declare(name + ".bias", {C_}, ParamKind::BnBias);
  mean_ = pb.declare_state(name + ".running_mean", {C_}, 0.0f);
  var_ = pb.declare_state(name + ".running_var", {C_}, 1.0f);
}

Tensor BatchNorm2d::forward(const Tensor& x, bool training) {
  HT_CHECK(x.ndim() == 4 && x.dim(1) == C_, name_, ": expected input [N, ", C_, ", H, W], got ",
           shape_str(x.shape()));
  const int N = int(x.dim(0)), HW = int(x.dim(2) * x.dim(3));
  x_ = x;
  const Device dev = x.device();
  Tensor y = buffer(y_, x.shape(), dev);
  const float *gamma = pb_->param(gamma_).data(), *beta = pb_->param(beta_).data();
  float *running_mean = pb_->state(mean_).data(), *running_var = pb_->state(var_).data();
  if (training) {
    HT_CHECK(int64_t(N) * HW > 1, name_, ": batch statistics need more than one value per channel, got input ",
             shape_str(x.shape()));
    ensure_shape(save_mean_, {C_}, dev);
    ensure_shape(save_invstd_, {C_}, dev);
    if (dev == Device::CUDA)
      cuda::batchnorm_forward_train(y.data(), save_mean_.data(), save_invstd_.data(), running_mean, running_var,
                                    x.data(), gamma, beta, N, C_, HW, momentum_, eps_, nullptr);
    else
      cpu::batchnorm_forward_train(y.data(), save_mean_.data(), save_invstd_.data(), running_mean, running_var,
                                   x.data(), gamma, beta, N, C_, HW, momentum_, eps_);
  } else if (dev == Device::CUDA) {
    cuda::batchnorm_forward_eval(y.data(), x.data(), gamma, beta, running_mean, running_var, N, C_, HW, eps_,
                                 nullptr);
  } else {
    cpu::batchnorm_forward_eval(y.data(), x.data(), gamma, beta, running_mean, running_var, N, C_, HW, eps_);
  }
  trained_forward_ = training;
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& dy) {
  HT_CHECK(trained_forward_, name_, ": backward after an eval-mode forward (only training mode has a backward)");
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == x_.shape(), name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(x_.shape()));
  const int N = int(x_.dim(0)), HW = int(x_.dim(2) * x_.dim(3));
  // The op always computes din (it is what couples the batch); dropped when not needed.
  Tensor dx = buffer(dx_, x_.shape(), x_.device());
  if (x_.device() == Device::CUDA)
    cuda::batchnorm_backward(dx.data(), pb_->grad(gamma_).data(), pb_->grad(beta_).data(), dy.data(), x_.data(),
                             pb_->param(gamma_).data(), save_mean_.data(), save_invstd_.data(), N, C_, HW, eps_,
                             nullptr);
  else
    cpu::batchnorm_backward(dx.data(), pb_->grad(gamma_).data(), pb_->grad(beta_).data(), dy.data(), x_.data(),
                            pb_->param(gamma_).data(), save_mean_.data(), save_invstd_.data(), N, C_, HW);
  x_ = Tensor();
  return need_dx_ ? dx : Tensor();
}

}  // namespace hetrain::nn
