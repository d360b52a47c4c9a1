// kernels/batchnorm.cu — batch norm's CUDA slot: cuDNN (src/cuda/batchnorm_cudnn.cpp) for the plain op,
// and our kernels for synchronised batch norm's three parts (their CPU twins: ops::cpu::batchnorm_stat_sums,
// _grad_sums, _backward_given in src/ops/batchnorm/batchnorm_cpu.cpp). Default stream.
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "common.cuh"
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/batchnorm/batchnorm.hpp"

namespace hetrain::cuda {
namespace {
// One block per channel; its threads stride over the channel's N·HW values and sum in double, as the CPU
// twin does (a float sum over a large batch rounds the variance away).
__global__ void stat_sums_kernel(double* sums, const float* x, const float* shift, int N, int C, int HW) {
  __shared__ double scratch[32];
  const int c = blockIdx.x;
  const double k = shift[c];
  const int64_t M = int64_t(N) * HW;
  double s = 0, ss = 0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const double d = double(x[((i / HW) * C + c) * HW + i % HW]) - k;
    s += d;
    ss += d * d;
  }
  s = detail::block_sum_f64(s, scratch);
  ss = detail::block_sum_f64(ss, scratch);
  if (threadIdx.x == 0) sums[c] = s, sums[C + c] = ss;
}

__global__ void grad_sums_kernel(double* sums, const float* dy, const float* x, const float* mean,
                                 const float* invstd, int N, int C, int HW) {
  __shared__ double scratch[32];
  const int c = blockIdx.x;
  const double mu = mean[c];
  const int64_t M = int64_t(N) * HW;
  double sdy = 0, sdyx = 0;
  for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
    const int64_t at = ((i / HW) * C + c) * HW + i % HW;
    sdy += dy[at];
    sdyx += double(dy[at]) * (double(x[at]) - mu);
  }
  sdy = detail::block_sum_f64(sdy, scratch);
  sdyx = detail::block_sum_f64(sdyx, scratch);
  if (threadIdx.x == 0) sums[c] = sdy, sums[C + c] = sdyx * double(invstd[c]);
}

// dx = γ·invstd·(dy − mean_dy − x̂·mean_dy_xhat), one thread per element.
__global__ void backward_given_kernel(float* dx, const float* dy, const float* x, const float* gamma,
                                      const float* mean, const float* invstd, const float* mean_dy,
                                      const float* mean_dy_xhat, int C, int HW, int64_t total) {
  HT_GRID_STRIDE(i, total) {
    const int c = int((i / HW) % C);
    const float xhat = (x[i] - mean[c]) * invstd[c];
    const float k = (gamma ? gamma[c] : 1.0f) * invstd[c];
    dx[i] = k * (dy[i] - mean_dy[c] - xhat * mean_dy_xhat[c]);
  }
}

void check_sizes(int N, int C, int HW, const char* who) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, who, ": bad sizes N=", N, " C=", C, " HW=", HW);
}

// The device's buffer for those sums, grown to the largest layer and kept (never freed: freeing at exit
// races the runtime's teardown). A cudaMalloc and cudaFree per layer would each wait for the whole device,
// gradient buckets that NCCL is reducing on its own stream included, and so undo their overlap.
double* sums_buffer(size_t n) {
  static std::mutex mu;
  static auto* by_device = new std::map<int, DeviceBuffer<double>>();
  int dev = 0;
  HT_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  DeviceBuffer<double>& b = (*by_device)[dev];
  if (b.size() < n) b = DeviceBuffer<double>(n);  // nothing still uses the old one: see sums_to_host
  return b.data();
}

// The 2·C sums of a one-block-per-channel kernel, brought to the host (the exchange between ranks runs there).
// The kernel and the copy run on the legacy default stream, like the layers, and only that stream is waited
// for, so the buffer is idle again when this returns.
template <typename Launch>
void sums_to_host(double* sums, int C, const char* who, Launch launch) {
  double* d = sums_buffer(size_t(2) * C);
  launch(d);
  HT_CUDA_CHECK_LAUNCH(who);
  copy_to_host(sums, d, size_t(2) * C * sizeof(double));
  stream_synchronize(nullptr);
}
}  // namespace
}  // namespace hetrain::cuda

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

void stat_sums_cuda(double* sums, const float* x, const float* shift, int N, int C, int HW) {
  cuda::check_sizes(N, C, HW, "batchnorm_stat_sums");
  cuda::sums_to_host(sums, C, "batchnorm_stat_sums", [&](double* d) {
    cuda::stat_sums_kernel<<<C, cuda::kBlock>>>(d, x, shift, N, C, HW);
  });
}
void grad_sums_cuda(double* sums, const float* dy, const float* x, const float* mean, const float* invstd, int N,
                    int C, int HW) {
  cuda::check_sizes(N, C, HW, "batchnorm_grad_sums");
  cuda::sums_to_host(sums, C, "batchnorm_grad_sums", [&](double* d) {
    cuda::grad_sums_kernel<<<C, cuda::kBlock>>>(d, dy, x, mean, invstd, N, C, HW);
  });
}
void backward_given_cuda(float* dx, const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* invstd, const float* mean_dy, const float* mean_dy_xhat, int N, int C, int HW) {
  cuda::check_sizes(N, C, HW, "batchnorm_backward_given");
  const int64_t total = int64_t(N) * C * HW;
  if (total == 0) return;
  cuda::backward_given_kernel<<<cuda::grid_for(total), cuda::kBlock>>>(
      dx, dy, x, gamma, mean, invstd, mean_dy, mean_dy_xhat, C, HW, total);
  HT_CUDA_CHECK_LAUNCH("batchnorm_backward_given");
}
}  // namespace
HT_OP_IMPLEMENTATION(batchnorm_forward_train_impl, Device::CUDA, train_cuda);
HT_OP_IMPLEMENTATION(batchnorm_forward_eval_impl, Device::CUDA, eval_cuda);
HT_OP_IMPLEMENTATION(batchnorm_backward_impl, Device::CUDA, backward_cuda);
HT_OP_IMPLEMENTATION(batchnorm_stat_sums_impl, Device::CUDA, stat_sums_cuda);
HT_OP_IMPLEMENTATION(batchnorm_grad_sums_impl, Device::CUDA, grad_sums_cuda);
HT_OP_IMPLEMENTATION(batchnorm_backward_given_impl, Device::CUDA, backward_given_cuda);
}  // namespace hetrain::ops
