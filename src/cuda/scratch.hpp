// src/cuda/scratch.hpp — per-device helper buffers for the ops whose library call wants a pointer the
// caller may leave null (private to the backend).
//
// cuDNN's batch norm needs γ and β (null means 1 and 0 in hetrain's contract) and writes dγ, dβ and dx
// even when the caller does not want them. These buffers stand in: constant ones and zeros that are never
// written, and a "discard" buffer that any op may write and nobody reads (concurrent writers on different
// streams are harmless for that reason). They grow on demand and live until the process ends.
#pragma once

#include <cstddef>

namespace hetrain::cuda::detail {
const float* device_ones(size_t n);   // n floats equal to 1 on the current device
const float* device_zeros(size_t n);  // n floats equal to 0 on the current device
float* device_discard(size_t n);      // n floats of write-only scratch on the current device
}  // namespace hetrain::cuda::detail
