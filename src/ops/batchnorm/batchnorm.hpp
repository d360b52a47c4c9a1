// ops/batchnorm — batch normalisation per channel over N·H·W, on any device, with cpu::batchnorm_*'s
// contract (hetrain/ops.hpp): training saves mean and 1/sqrt(var + eps) and updates the running statistics
// as PyTorch does; eval uses the running ones. CPU: src/ops/batchnorm/batchnorm_cpu.cpp; CUDA: cuDNN
// (src/cuda/batchnorm_cudnn.cpp). x and y are [N, C, H, W]; gamma, beta, statistics [C].
#pragma once

#include "ops/dispatch.hpp"

namespace hetrain::ops {

void batchnorm_forward_train(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd,
                             const Tensor& running_mean, const Tensor& running_var, const Tensor& x,
                             const Tensor& gamma, const Tensor& beta, float momentum, float eps);
void batchnorm_forward_eval(const Tensor& y, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                            const Tensor& running_mean, const Tensor& running_var, float eps);
// dx overwritten; dgamma, dbeta accumulated. eps is the forward's (cuDNN needs it again).
void batchnorm_backward(const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta, const Tensor& dy,
                        const Tensor& x, const Tensor& gamma, const Tensor& save_mean, const Tensor& save_invstd,
                        float eps);

// Synchronised batch norm's parts (cpu::batchnorm_stat_sums, _grad_sums, _backward_given in hetrain/ops.hpp):
// a rank's per-channel sums land in `sums` (2·C doubles in host memory) for the exchange between ranks;
// the normalisation itself is batchnorm_forward_eval with the global mean and biased variance.
void batchnorm_stat_sums(double* sums, const Tensor& x, const Tensor& shift);
void batchnorm_grad_sums(double* sums, const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd);
void batchnorm_backward_given(const Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& gamma,
                              const Tensor& mean, const Tensor& invstd, const Tensor& mean_dy,
                              const Tensor& mean_dy_xhat);

using BnTrainFn = void(float* y, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                       const float* x, const float* gamma, const float* beta, int N, int C, int HW, float momentum,
                       float eps);
using BnEvalFn = void(float* y, const float* x, const float* gamma, const float* beta, const float* running_mean,
                      const float* running_var, int N, int C, int HW, float eps);
using BnBackwardFn = void(float* dx, float* dgamma, float* dbeta, const float* dy, const float* x,
                          const float* gamma, const float* save_mean, const float* save_invstd, int N, int C, int HW,
                          float eps);
using BnStatSumsFn = void(double* sums, const float* x, const float* shift, int N, int C, int HW);
using BnGradSumsFn = void(double* sums, const float* dy, const float* x, const float* mean, const float* invstd, int N,
                          int C, int HW);
using BnBackwardGivenFn = void(float* dx, const float* dy, const float* x, const float* gamma, const float* mean,
                               const float* invstd, const float* mean_dy, const float* mean_dy_xhat, int N, int C,
                               int HW);
extern Dispatch<BnTrainFn> batchnorm_forward_train_impl;
extern Dispatch<BnEvalFn> batchnorm_forward_eval_impl;
extern Dispatch<BnBackwardFn> batchnorm_backward_impl;
extern Dispatch<BnStatSumsFn> batchnorm_stat_sums_impl;
extern Dispatch<BnGradSumsFn> batchnorm_grad_sums_impl;
extern Dispatch<BnBackwardGivenFn> batchnorm_backward_given_impl;

}  // namespace hetrain::ops
