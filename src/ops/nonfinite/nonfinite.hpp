// ops/nonfinite — how many elements of a tensor are NaN or ±Inf, on any device: the check of a step's
// gradients before the optimizer (and FP16's loss scaler) uses them. CUDA: kernels/nonfinite.cu.
#pragma once

#include <cstdint>

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// NaN and ±Inf elements of t; waits for the device.
int64_t count_nonfinite(const Tensor& t);

using CountNonfiniteFn = int64_t(const float* x, int64_t n);
extern Dispatch<CountNonfiniteFn> count_nonfinite_impl;

}  // namespace hetrain::ops
