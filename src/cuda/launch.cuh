// src/cuda/launch.cuh — the launch shape of every element-wise kernel (kernels/*.cu and the device layer's
// own): 256-thread blocks, a grid capped at 8192 blocks, and grid-stride loops that cover whatever the
// grid does not. The cap bounds the atomics of kernels that count (kernels/nonfinite.cu).
#pragma once

#include <cstdint>

namespace hetrain::cuda {
constexpr int kBlock = 256;
constexpr int64_t kMaxGrid = 8192;

inline int grid_for(int64_t n) {
  const int64_t g = (n + kBlock - 1) / kBlock;
  return int(g < kMaxGrid ? g : kMaxGrid);
}
}  // namespace hetrain::cuda

// for (i over [0, n)) in a grid-stride loop: each thread takes every (grid size)-th element from its own.
#define HT_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)
