// ops/scale — x ← a·x in place, on any device. Used to take a loss scale back out of a gradient that no
// reduction weights (docs/precision.md). CPU: a plain loop here; CUDA: kernels/scale.cu.
#pragma once

#include "ops/dispatch.hpp"

namespace hetrain::ops {

void scale(const Tensor& x, float a);

using ScaleFn = void(float* x, float a, int64_t n);
extern Dispatch<ScaleFn> scale_impl;

}  // namespace hetrain::ops
