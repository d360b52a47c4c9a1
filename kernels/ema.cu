// kernels/ema.cu — the moving average's step on the device (ops/ema), and the op's CUDA slot. CPU twin:
// src/ops/ema/ema.cpp, which test/gpu/ema_test.cpp compares it with bit for bit.
#include <cstdint>

#include "cuda/check.cuh"
#include "cuda/launch.cuh"
#include "hetrain/cuda.hpp"
#include "ops/ema/ema.hpp"

namespace hetrain::cuda {
namespace {
// Each multiply and the add rounded on its own (no FMA), in the CPU loop's order: the averages of a CPU
// rank and a GPU rank stay identical.
__global__ void ema_update_kernel(float* avg, const float* x, float keep, float take, int64_t n) {
  HT_GRID_STRIDE(i, n) avg[i] = __fadd_rn(__fmul_rn(avg[i], keep), __fmul_rn(take, x[i]));
}
}  // namespace

void ema_update(float* avg, const float* x, float decay, int64_t n, CudaStream stream) {
  HT_CHECK(n >= 0, "ema_update: negative size ", n);
  if (n == 0) return;
  HT_CHECK(avg && x, "ema_update: null pointer");
  ema_update_kernel<<<grid_for(n), kBlock, 0, stream>>>(avg, x, decay, 1.0f - decay, n);
  HT_CUDA_CHECK_LAUNCH("ema_update");
}

}  // namespace hetrain::cuda

namespace hetrain::ops {
namespace {
void ema_update_cuda(float* avg, const float* x, float decay, int64_t n) { cuda::ema_update(avg, x, decay, n, nullptr); }
}  // namespace
HT_OP_IMPLEMENTATION(ema_update_impl, Device::CUDA, ema_update_cuda);
}  // namespace hetrain::ops
