// src/cuda/batchnorm_cudnn.cpp — spatial batch norm through cuDNN with ops::cpu::batchnorm_*'s contract.
//
// cuDNN's running update is runningMean = (1-factor)·running + factor·mean with the unbiased variance for
// runningVariance: PyTorch's momentum convention with factor = momentum. It saves the mean and
// 1/sqrt(var + eps) (biased var), which is what ops::cpu::batchnorm_forward_train saves. Where hetrain allows a
// null pointer and cuDNN does not (γ, β; one of the two running stats; dγ, dβ, dx), the per-device helper
// buffers of scratch.hpp stand in. Backward accumulates the parameter gradients with betaParamDiff = 1 and
// overwrites dx with betaDataDiff = 0.
#include "cuda/descriptors.hpp"
#include "cuda/handles.hpp"
#include "cuda/scratch.hpp"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
// Spatial mode normalises over N, H, W per channel: HW values of a plane go in W (H = 1).
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL;

void check_sizes(int N, int C, int HW, const char* who) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, who, ": bad sizes N=", N, " C=", C, " HW=", HW);
}
}  // namespace

void batchnorm_forward_train(float* out, float* save_mean, float* save_invstd, float* running_mean, float* running_var,
                             const float* in, const float* gamma, const float* beta, int N, int C, int HW,
                             float momentum, float eps, CudaStream stream) {
  check_sizes(N, C, HW, "cuda::batchnorm_forward_train");
  if (N == 0) return;  // as the CPU op: nothing to normalise, running stats untouched
  HT_CHECK(int64_t(N) * HW > 1, "cuda::batchnorm_forward_train: need more than 1 value per channel in training, got N=",
           N, " HW=", HW);
  HT_CHECK(eps > 0, "cuda::batchnorm_forward_train: eps must be positive, got ", eps);
  HT_CHECK(out && in && save_mean && save_invstd, "cuda::batchnorm_forward_train: null pointer");
  // cuDNN takes both running stats or neither; a lone one gets a discarded partner.
  if ((running_mean == nullptr) != (running_var == nullptr)) {
    float* stand_in = detail::device_discard(size_t(C));
    if (!running_mean) running_mean = stand_in;
    if (!running_var) running_var = stand_in;
  }
  if (!gamma) gamma = detail::device_ones(size_t(C));
  if (!beta) beta = detail::device_zeros(size_t(C));
  detail::TensorDesc x(N, C, 1, HW), stats(1, C, 1, 1);
  cudnnHandle_t h = detail::cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f;
  HT_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(h, kMode, &one, &zero, x, in, x, out, stats, gamma, beta,
                                                        double(momentum), running_mean, running_var, double(eps),
                                                        save_mean, save_invstd));
}

void batchnorm_forward_eval(float* out, const float* in, const float* gamma, const float* beta,
                            const float* running_mean, const float* running_var, int N, int C, int HW, float eps,
                            CudaStream stream) {
  check_sizes(N, C, HW, "cuda::batchnorm_forward_eval");
  if (N == 0) return;
  HT_CHECK(eps > 0, "cuda::batchnorm_forward_eval: eps must be positive, got ", eps);
  HT_CHECK(out && in && running_mean && running_var, "cuda::batchnorm_forward_eval: null pointer");
  if (!gamma) gamma = detail::device_ones(size_t(C));
  if (!beta) beta = detail::device_zeros(size_t(C));
  detail::TensorDesc x(N, C, 1, HW), stats(1, C, 1, 1);
  cudnnHandle_t h = detail::cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f;
  HT_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(h, kMode, &one, &zero, x, in, x, out, stats, gamma, beta,
                                                         running_mean, running_var, double(eps)));
}

void batchnorm_backward(float* din, float* dgamma, float* dbeta, const float* dout, const float* in,
                        const float* gamma, const float* save_mean, const float* save_invstd, int N, int C, int HW,
                        float eps, CudaStream stream) {
  check_sizes(N, C, HW, "cuda::batchnorm_backward");
  if (N == 0) return;  // parameter gradients left as they are
  HT_CHECK(eps > 0, "cuda::batchnorm_backward: eps must be positive, got ", eps);
  HT_CHECK(dout && in && save_mean && save_invstd, "cuda::batchnorm_backward: null pointer");
  if (!din && !dgamma && !dbeta) return;
  const size_t n = size_t(N) * C * HW;
  // Unwanted outputs go to the discard buffer: dx first (n floats), then dγ and dβ after it, so the three
  // never overlap within this call.
  float* discard = (!din || !dgamma || !dbeta) ? detail::device_discard((din ? 0 : n) + 2 * size_t(C)) : nullptr;
  if (!din) din = discard, discard += n;
  if (!dgamma) dgamma = discard;
  if (!dbeta) dbeta = discard + C;
  if (!gamma) gamma = detail::device_ones(size_t(C));
  detail::TensorDesc x(N, C, 1, HW), stats(1, C, 1, 1);
  cudnnHandle_t h = detail::cudnn_on(stream);
  const float one = 1.0f, zero = 0.0f;
  // The layer's own epsilon, the one its forward used: cuDNN documents that backward takes the forward's
  // value, even where it reads the saved invstd instead of recomputing it.
  HT_CUDNN_CHECK(cudnnBatchNormalizationBackward(h, kMode, &one, &zero, &one, &one, x, in, x, dout, x, din, stats,
                                                 gamma, dgamma, dbeta, double(eps), save_mean, save_invstd));
}

}  // namespace hetrain::cuda
