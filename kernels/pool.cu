// kernels/pool.cu — pooling's CUDA side (ops/pool): the global average pooling kernels, and the slots of
// max and average pooling, which call cuDNN (src/cuda/pool2d_cudnn.cpp); legacy default stream.
// CPU twins: src/ops/pool/pool_cpu.cpp.
#include <cstdint>

#include "common.cuh"
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/pool/pool.hpp"

namespace hetrain::cuda {
namespace {
// One warp per (n, c) plane of HW values: lanes stride the plane (coalesced), then a warp sum.
__global__ void global_avgpool_forward_kernel(float* out, const float* in, int64_t planes, int HW) {
  const int64_t plane = blockIdx.x * int64_t(blockDim.x >> 5) + (threadIdx.x >> 5);
  if (plane >= planes) return;  // whole warps leave together: the shuffle below sees full warps only
  const float* x = in + plane * HW;
  float s = 0.0f;
  for (int j = threadIdx.x & 31; j < HW; j += 32) s += x[j];
  s = detail::warp_sum(s);
  if ((threadIdx.x & 31) == 0) out[plane] = s / float(HW);
}

__global__ void global_avgpool_backward_kernel(float* din, const float* dout, int64_t total, int HW) {
  HT_GRID_STRIDE(i, total) din[i] = dout[i / HW] / float(HW);
}
}  // namespace

void global_avgpool_forward(float* out, const float* in, int N, int C, int HW, CudaStream stream) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, "cuda::global_avgpool_forward: bad sizes N=", N, " C=", C, " HW=", HW);
  if (N == 0) return;
  HT_CHECK(out && in, "cuda::global_avgpool_forward: null pointer");
  const int64_t planes = int64_t(N) * C, per_block = kBlock / 32;  // one plane per warp
  global_avgpool_forward_kernel<<<unsigned(HT_CEIL_DIV(planes, per_block)), kBlock, 0, stream>>>(out, in, planes, HW);
  HT_CUDA_CHECK_LAUNCH("global_avgpool_forward");
}

void global_avgpool_backward(float* din, const float* dout, int N, int C, int HW, CudaStream stream) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, "cuda::global_avgpool_backward: bad sizes N=", N, " C=", C, " HW=", HW);
  if (N == 0) return;
  HT_CHECK(din && dout, "cuda::global_avgpool_backward: null pointer");
  const int64_t total = int64_t(N) * C * HW;
  global_avgpool_backward_kernel<<<grid_for(total), kBlock, 0, stream>>>(din, dout, total, HW);
  HT_CUDA_CHECK_LAUNCH("global_avgpool_backward");
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
namespace {
void maxpool_forward_cuda(const Tensor& y, const Tensor& x, MaxPoolSaved& saved, bool for_backward) {
  cuda::maxpool2d_forward(y.data(), x.data(), saved.geom, nullptr);
  if (for_backward) saved.x = x, saved.y = y;  // cuDNN's backward re-finds the maxima from both
}
void maxpool_backward_cuda(const Tensor& dx, const Tensor& dy, MaxPoolSaved& saved) {
  cuda::maxpool2d_backward(dx.data(), dy.data(), saved.y.data(), saved.x.data(), saved.geom, nullptr);
}
void avgpool_forward_cuda(float* y, const float* x, const Pool2dGeom& g) {
  cuda::avgpool2d_forward(y, x, g, nullptr);
}
void avgpool_backward_cuda(float* dx, const float* dy, const float* x, const Pool2dGeom& g) {
  cuda::avgpool2d_backward(dx, dy, x, g, nullptr);
}
void global_forward_cuda(float* out, const float* in, int N, int C, int HW) {
  cuda::global_avgpool_forward(out, in, N, C, HW, nullptr);
}
void global_backward_cuda(float* din, const float* dout, int N, int C, int HW) {
  cuda::global_avgpool_backward(din, dout, N, C, HW, nullptr);
}
}  // namespace
HT_OP_IMPLEMENTATION(maxpool2d_forward_impl, Device::CUDA, maxpool_forward_cuda);
HT_OP_IMPLEMENTATION(maxpool2d_backward_impl, Device::CUDA, maxpool_backward_cuda);
HT_OP_IMPLEMENTATION(avgpool2d_forward_impl, Device::CUDA, avgpool_forward_cuda);
HT_OP_IMPLEMENTATION(avgpool2d_backward_impl, Device::CUDA, avgpool_backward_cuda);
HT_OP_IMPLEMENTATION(global_avgpool_forward_impl, Device::CUDA, global_forward_cuda);
HT_OP_IMPLEMENTATION(global_avgpool_backward_impl, Device::CUDA, global_backward_cuda);
}  // namespace hetrain::ops
