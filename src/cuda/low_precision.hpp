// src/cuda/low_precision.hpp — the device scratch that holds the 16-bit operands of BF16/FP16 convolutions and
// dense layers (src/cuda/low_precision.cpp; private to the backend).
//
// Tensors stay float (docs/precision.md); a 16-bit layer casts its operands into this scratch right before its
// cuDNN/cuBLAS call and reads its 16-bit result back from it. One scratch per device, shared by every such
// layer, grown to the largest need: layers run one after another on one stream, so the scratch is ordered by
// that stream — a layer's casts, library call and cast back are enqueued on it before the next layer's
// overwrite the same bytes. Running two 16-bit layers on different streams at once would race (hetrain/cuda.hpp
// says so at each op).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hetrain::cuda::detail {

// Bytes of one region holding n 16-bit values, rounded up so that the next region starts 256-byte aligned
// (cudaMalloc's alignment, which tensor-core kernels of cuDNN and cuBLAS want for their operands).
inline size_t half_region_bytes(int64_t n) {
  const size_t bytes = size_t(n) * 2;
  return (bytes + 255) / 256 * 256;
}

// The current device's scratch, at least `bytes` long (null when bytes is 0). Growing it first waits for the
// device, so that no kernel still reads the old block when it is freed. Call it with the whole need of a
// layer at set-up too: an out-of-memory then shows at set-up, not mid-step.
char* low_precision_scratch(size_t bytes);

}  // namespace hetrain::cuda::detail
