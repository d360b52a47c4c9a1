// kernels/scale.cu — x ← a·x (ops/scale; also the b_r/B weight of a rank's gradient before the sum over
// ranks, src/dist/device_communicators.cpp). CPU twin: src/ops/scale/scale.cpp.
#include <cstdint>

#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/scale/scale.hpp"

namespace hetrain::cuda {
namespace {
__global__ void scale_kernel(float* x, float a, int64_t n) {
  HT_GRID_STRIDE(i, n) x[i] *= a;
}
}  // namespace

void scale(float* x, float a, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "scale: negative size ", n);
  if (n == 0) return;
  HT_CHECK(x, "scale: null pointer");
  scale_kernel<<<grid_for(n), kBlock, 0, stream>>>(x, a, n);
  HT_CUDA_CHECK_LAUNCH("scale");
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
namespace {
void scale_cuda(float* x, float a, int64_t n) { cuda::scale(x, a, n, nullptr); }
}  // namespace
HT_OP_IMPLEMENTATION(scale_impl, Device::CUDA, scale_cuda);
}  // namespace hetrain::ops
