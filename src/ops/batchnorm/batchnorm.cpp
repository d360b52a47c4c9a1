// ops/batchnorm/batchnorm.cpp — batch norm's entry points and CPU slot (cpu::batchnorm_*).
#include "ops/batchnorm/batchnorm.hpp"

#include "hetrain/op_profile.hpp"
#include "hetrain/ops.hpp"

namespace hetrain::ops {

Dispatch<BnTrainFn> batchnorm_forward_train_impl("batchnorm_forward_train");
Dispatch<BnEvalFn> batchnorm_forward_eval_impl("batchnorm_forward_eval");
Dispatch<BnBackwardFn> batchnorm_backward_impl("batchnorm_backward");
Dispatch<BnStatSumsFn> batchnorm_stat_sums_impl("batchnorm_stat_sums");
Dispatch<BnGradSumsFn> batchnorm_grad_sums_impl("batchnorm_grad_sums");
Dispatch<BnBackwardGivenFn> batchnorm_backward_given_impl("batchnorm_backward_given");

namespace {
void backward_cpu(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                  const float* save_mean, const float* save_invstd, int N, int C, int HW, float /*eps: saved invstd has it*/) {
  cpu::batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd, N, C, HW);
}

struct Dims {
  int N, C, HW;
};
Dims dims_of(const char* op, const Tensor& x) {
  HT_CHECK(x.ndim() == 4, op, ": expected [N, C, H, W], got ", shape_str(x.shape()));
  return {int(x.dim(0)), int(x.dim(1)), int(x.dim(2) * x.dim(3))};
}
void check_channels(const char* op, std::initializer_list<const Tensor*> per_channel, int C) {
  for (const Tensor* t : per_channel)
    if (t->defined()) check_shape(op, "per-channel tensor", *t, {C});
}
}  // namespace

HT_OP_IMPLEMENTATION(batchnorm_forward_train_impl, Device::CPU, cpu::batchnorm_forward_train<float>);
HT_OP_IMPLEMENTATION(batchnorm_forward_eval_impl, Device::CPU, cpu::batchnorm_forward_eval<float>);
HT_OP_IMPLEMENTATION(batchnorm_backward_impl, Device::CPU, backward_cpu);
HT_OP_IMPLEMENTATION(batchnorm_stat_sums_impl, Device::CPU, cpu::batchnorm_stat_sums<float>);
HT_OP_IMPLEMENTATION(batchnorm_grad_sums_impl, Device::CPU, cpu::batchnorm_grad_sums<float>);
HT_OP_IMPLEMENTATION(batchnorm_backward_given_impl, Device::CPU, cpu::batchnorm_backward_given<float>);

void batchnorm_forward_train(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                             const Tensor& running_mean, const Tensor& running_var, const Tensor& x,
                             const Tensor& gamma, const Tensor& beta, float momentum, float eps) {
  const char* op = "batchnorm_forward_train";
  OpProfileScope profile(op);
  const Dims d = dims_of(op, x);
  check_shape(op, "output", y, x.shape());
  check_channels(op, {&save_mean, &save_invstd, &running_mean, &running_var, &gamma, &beta}, d.C);
  const Device dev = common_device(op, {&y, &save_mean, &save_invstd, &running_mean, &running_var, &x, &gamma, &beta});
  batchnorm_forward_train_impl.on(dev)(y.data(), save_mean.data(), save_invstd.data(), running_mean.data(),
                                       running_var.data(), x.data(), gamma.data(), beta.data(), d.N, d.C, d.HW,
                                       momentum, eps);
}

void batchnorm_forward_eval(const Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& running_mean, const Tensor& running_var, float eps) {
  const char* op = "batchnorm_forward_eval";
  const Dims d = dims_of(op, x);
  check_shape(op, "output", y, x.shape());
  check_channels(op, {&running_mean, &running_var, &gamma, &beta}, d.C);
  const Device dev = common_device(op, {&y, &x, &gamma, &beta, &running_mean, &running_var});
  batchnorm_forward_eval_impl.on(dev)(y.data(), x.data(), gamma.data(), beta.data(), running_mean.data(),
                                      running_var.data(), d.N, d.C, d.HW, eps);
}

void batchnorm_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dy,
                        const Tensor& x, const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                        float eps) {
  const char* op = "batchnorm_backward";
  OpProfileScope profile(op);
  const Dims d = dims_of(op, x);
  check_shape(op, "output gradient", dy, x.shape());
  check_shape(op, "input gradient", dx, x.shape());
  check_channels(op, {&dgamma, &dbeta, &gamma, &save_mean, &save_invstd}, d.C);
  const Device dev = common_device(op, {&dx, &dgamma, &dbeta, &dy, &x, &gamma, &save_mean, &save_invstd});
  batchnorm_backward_impl.on(dev)(dx.data(), dgamma.data(), dbeta.data(), dy.data(), x.data(), gamma.data(),
                                  save_mean.data(), save_invstd.data(), d.N, d.C, d.HW, eps);
}

void batchnorm_stat_sums(double* sums, const Tensor& x, const Tensor& shift) {
  const char* op = "batchnorm_stat_sums";
  const Dims d = dims_of(op, x);
  check_channels(op, {&shift}, d.C);
  const Device dev = common_device(op, {&x, &shift});
  batchnorm_stat_sums_impl.on(dev)(sums, x.data(), shift.data(), d.N, d.C, d.HW);
}

void batchnorm_grad_sums(double* sums, const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd) {
  const char* op = "batchnorm_grad_sums";
  const Dims d = dims_of(op, x);
  check_shape(op, "output gradient", dy, x.shape());
  check_channels(op, {&mean, &invstd}, d.C);
  const Device dev = common_device(op, {&dy, &x, &mean, &invstd});
  batchnorm_grad_sums_impl.on(dev)(sums, dy.data(), x.data(), mean.data(), invstd.data(), d.N, d.C, d.HW);
}

void batchnorm_backward_given(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                              const Tensor& mean, const Tensor& invstd, const Tensor& mean_dy,
                              const Tensor& mean_dy_xhat) {
  const char* op = "batchnorm_backward_given";
  const Dims d = dims_of(op, x);
  check_shape(op, "output gradient", dy, x.shape());
  check_shape(op, "input gradient", dx, x.shape());
  check_channels(op, {&gamma, &mean, &invstd, &mean_dy, &mean_dy_xhat}, d.C);
  const Device dev = common_device(op, {&dx, &dy, &x, &gamma, &mean, &invstd, &mean_dy, &mean_dy_xhat});
  batchnorm_backward_given_impl.on(dev)(dx.data(), dy.data(), x.data(), gamma.data(), mean.data(), invstd.data(),
                                        mean_dy.data(), mean_dy_xhat.data(), d.N, d.C, d.HW);
}

}  // namespace hetrain::ops
