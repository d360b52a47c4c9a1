// kernels/global_avgpool.cu — global average pooling forward and backward.
// CPU twin: cpu::global_avgpool_forward / global_avgpool_backward (hetrain/ops.hpp).
#include <cstdint>

#include "common.cuh"
#include "cuda/check.cuh"
#include "hetrain/cuda.hpp"

namespace hetrain::cuda {
namespace {
constexpr int kBlock = 256;  // 8 warps: 8 planes per block in forward
constexpr int64_t kMaxGrid = 8192;

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
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
    din[i] = dout[i / HW] / float(HW);
}
}  // namespace

void global_avgpool_forward(float* out, const float* in, int N, int C, int HW, CudaStream stream) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, "cuda::global_avgpool_forward: bad sizes N=", N, " C=", C, " HW=", HW);
  if (N == 0) return;
  HT_CHECK(out && in, "cuda::global_avgpool_forward: null pointer");
  const int64_t planes = int64_t(N) * C, per_block = kBlock / 32;
  global_avgpool_forward_kernel<<<unsigned(HT_CEIL_DIV(planes, per_block)), kBlock, 0, stream>>>(out, in, planes, HW);
  HT_CUDA_CHECK_LAUNCH("global_avgpool_forward");
}

void global_avgpool_backward(float* din, const float* dout, int N, int C, int HW, CudaStream stream) {
  HT_CHECK(N >= 0 && C > 0 && HW > 0, "cuda::global_avgpool_backward: bad sizes N=", N, " C=", C, " HW=", HW);
  if (N == 0) return;
  HT_CHECK(din && dout, "cuda::global_avgpool_backward: null pointer");
  const int64_t total = int64_t(N) * C * HW, blocks = HT_CEIL_DIV(total, int64_t(kBlock));
  global_avgpool_backward_kernel<<<int(blocks < kMaxGrid ? blocks : kMaxGrid), kBlock, 0, stream>>>(din, dout, total,
                                                                                                   HW);
  HT_CUDA_CHECK_LAUNCH("global_avgpool_backward");
}

}  // namespace hetrain::cuda
