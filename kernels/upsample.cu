// kernels/upsample.cu — the CUDA twins of ops/upsample/upsample.cpp (grid-stride loops, legacy
// default stream).
#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "ops/upsample/upsample.hpp"

namespace hetrain::ops {
namespace {
using cuda::grid_for;
using cuda::kBlock;

// One thread per output element: neighbouring threads write neighbouring addresses.
__global__ void upsample_nearest_kernel(float* y, const float* x, int64_t n, int64_t H, int64_t W, int64_t f) {
  const int64_t Wo = W * f, Ho = H * f;
  HT_GRID_STRIDE(i, n) {
    const int64_t ox = i % Wo, t = i / Wo, oy = t % Ho, plane = t / Ho;
    y[i] = x[(plane * H + oy / f) * W + ox / f];
  }
}
// One thread per dx element, summing in the CPU's order so that the two agree bit for bit.
__global__ void upsample_nearest_backward_kernel(float* dx, const float* dy, int64_t n, int64_t W, int64_t f) {
  const int64_t Wo = W * f;
  HT_GRID_STRIDE(i, n) {
    const int64_t ix = i % W, r = i / W;
    const float* block = dy + r * f * Wo + ix * f;
    float acc = 0.f;
    for (int64_t k = 0; k < f; ++k)
      for (int64_t s = 0; s < f; ++s) acc += block[k * Wo + s];
    dx[i] = acc;
  }
}

void upsample_nearest_forward_cuda(float* y, const float* x, int64_t planes, int64_t H, int64_t W, int factor) {
  const int64_t n = planes * H * factor * W * factor;
  if (n == 0) return;
  upsample_nearest_kernel<<<grid_for(n), kBlock>>>(y, x, n, H, W, factor);
  HT_CUDA_CHECK_LAUNCH("upsample_nearest_forward");
}
void upsample_nearest_backward_cuda(float* dx, const float* dy, int64_t planes, int64_t H, int64_t W, int factor) {
  const int64_t n = planes * H * W;
  if (n == 0) return;
  upsample_nearest_backward_kernel<<<grid_for(n), kBlock>>>(dx, dy, n, W, factor);
  HT_CUDA_CHECK_LAUNCH("upsample_nearest_backward");
}
}  // namespace

HT_OP_IMPLEMENTATION(upsample_nearest_forward_impl, Device::CUDA, upsample_nearest_forward_cuda);
HT_OP_IMPLEMENTATION(upsample_nearest_backward_impl, Device::CUDA, upsample_nearest_backward_cuda);

}  // namespace hetrain::ops
