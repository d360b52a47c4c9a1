// kernels/concat.cu — the CUDA twin of ops/concat/concat.cpp (grid-stride loop, legacy default stream).
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "ops/concat/concat.hpp"

namespace hetrain::ops {
namespace {
using cuda::grid_for;
using cuda::kBlock;

// d and s point at the first copied channel of sample 0; each sample's block of copied channels is contiguous.
__global__ void copy_channels_kernel(float* d, const float* s, int64_t n, int64_t block, int64_t dst_stride,
                                     int64_t src_stride) {
  HT_GRID_STRIDE(i, n) {
    const int64_t sample = i / block, j = i % block;
    d[sample * dst_stride + j] = s[sample * src_stride + j];
  }
}

void copy_channels_cuda(float* dst, const float* src, const ChannelCopy& g) {
  const int64_t block = g.channels * g.plane, n = g.N * block;
  if (n == 0) return;
  copy_channels_kernel<<<grid_for(n), kBlock>>>(dst + g.dst_offset * g.plane, src + g.src_offset * g.plane, n, block,
                                                 g.dst_channels * g.plane, g.src_channels * g.plane);
  HT_CUDA_CHECK_LAUNCH("copy_channels");
}
}  // namespace

HT_OP_IMPLEMENTATION(copy_channels_impl, Device::CUDA, copy_channels_cuda);

}  // namespace hetrain::ops
