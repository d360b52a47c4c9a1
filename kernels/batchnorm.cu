// kernels/batchnorm.cu — batch norm's CUDA slot: cuDNN (src/cuda/batchnorm_cudnn.cpp), default stream.
#include "hetrain/cuda.hpp"
#include "ops/batchnorm/batchnorm.hpp"

namespace hetrain::ops {
namespace {
void train_cuda(float* y, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                const float* x, const float* gamma, const float* beta, int N, int C, int HW, float momentum,
                float eps) {
  cuda::batchnorm_forward_train(y, save_mean, save_invstd, running_mean, running_var, x, gamma, beta, N, C, HW,
                                momentum, eps, nullptr);
}
void eval_cuda(float* y, const float* x, const float* gamma, const float* beta, const float* running_mean,
               const float* running_var, int N, int C, int HW, float eps) {
  cuda::batchnorm_forward_eval(y, x, gamma, beta, running_mean, running_var, N, C, HW, eps, nullptr);
}
void backward_cuda(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x, const float* gamma,
                   const float* save_mean, const float* save_invstd, int N, int C, int HW, float eps) {
  cuda::batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_invstd, N, C, HW, eps, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(batchnorm_forward_train_impl, Device::CUDA, train_cuda);
HT_OP_IMPLEMENTATION(batchnorm_forward_eval_impl, Device::CUDA, eval_cuda);
HT_OP_IMPLEMENTATION(batchnorm_backward_impl, Device::CUDA, backward_cuda);
}  // namespace hetrain::ops
