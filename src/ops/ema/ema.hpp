// ops/ema — an exponential moving average's step, avg ← d·avg + (1 − d)·x, on any device (YOLOv5's ModelEMA:
// v *= d; v += (1 − d)·x, rounded in that order). CPU: a plain loop here, no FMA, so a CPU rank and a GPU
// rank round alike; CUDA: kernels/ema.cu.
#pragma once

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// avg and x: the same shape, on one device.
void ema_update(const Tensor& avg, const Tensor& x, float decay);

using EmaUpdateFn = void(float* avg, const float* x, float decay, int64_t n);
extern Dispatch<EmaUpdateFn> ema_update_impl;

}  // namespace hetrain::ops
