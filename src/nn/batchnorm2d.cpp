// nn/batchnorm2d.cpp — batch-norm layer over ops::batchnorm_* (any device).
#include "nn/batchnorm2d.hpp"

#include "hetrain/error.hpp"
#include "ops/batchnorm/batchnorm.hpp"

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
  x_ = x;
  const Device dev = x.device();
  Tensor y = buffer(y_, x.shape(), dev);
  const Tensor gamma = pb_->param(gamma_), beta = pb_->param(beta_);
  const Tensor running_mean = pb_->state(mean_), running_var = pb_->state(var_);
  if (training) {
    HT_CHECK(x.dim(0) * x.dim(2) * x.dim(3) > 1, name_,
             ": batch statistics need more than one value per channel, got input ", shape_str(x.shape()));
    ensure_shape(save_mean_, {C_}, dev);
    ensure_shape(save_invstd_, {C_}, dev);
    ops::batchnorm_forward_train(y, save_mean_, save_invstd_, running_mean, running_var, x, gamma, beta, momentum_,
                                 eps_);
  } else {
    ops::batchnorm_forward_eval(y, x, gamma, beta, running_mean, running_var, eps_);
  }
  trained_forward_ = training;
  return y;
}

Tensor BatchNorm2d::backward(const Tensor& dy) {
  HT_CHECK(trained_forward_, name_, ": backward after an eval-mode forward (only training mode has a backward)");
  HT_CHECK(x_.defined(), name_, ": backward without a forward (each forward allows one backward)");
  HT_CHECK(dy.shape() == x_.shape(), name_, ": gradient ", shape_str(dy.shape()), " does not match output ",
           shape_str(x_.shape()));
  // The op always computes dx (it is what couples the batch); dropped when not needed.
  Tensor dx = buffer(dx_, x_.shape(), x_.device());
  ops::batchnorm_backward(dx, pb_->grad(gamma_), pb_->grad(beta_), dy, x_, pb_->param(gamma_), save_mean_,
                          save_invstd_, eps_);
  x_ = Tensor();
  return need_dx_ ? dx : Tensor();
}

}  // namespace hetrain::nn
