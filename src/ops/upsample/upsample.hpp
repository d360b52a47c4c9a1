// ops/upsample — nearest-neighbour upsampling by an integer factor f (YOLOv5's neck uses f = 2): every input
// pixel becomes an f×f block. The backward sums each f×f block of dy, in a fixed order (rows of the block
// top to bottom, each left to right) on every device, so CPU and CUDA results agree bit for bit.
#pragma once

#include <cstdint>

#include "ops/dispatch.hpp"

namespace hetrain::ops {

// y [N, C, H·f, W·f] ← x [N, C, H, W]; f ≥ 1.
void upsample_nearest_forward(const Tensor& y, const Tensor& x, int factor);
// dx [N, C, H, W] (overwritten) ← dy [N, C, H·f, W·f]: each dx is the sum of its f×f block of dy.
void upsample_nearest_backward(const Tensor& dx, const Tensor& dy, int factor);

// The CPU implementations, for float and double. planes = N·C; H, W are the sizes of the small side.
// y [planes, H·f, W·f], x [planes, H, W].
template <typename T>
void upsample_nearest_forward_cpu(T* y, const T* x, int64_t planes, int64_t H, int64_t W, int factor);
// dx [planes, H, W], dy [planes, H·f, W·f].
template <typename T>
void upsample_nearest_backward_cpu(T* dx, const T* dy, int64_t planes, int64_t H, int64_t W, int factor);

// Per-device implementations on raw float pointers of the tensors' device (CUDA: the legacy default stream).
// out and in as in the templates above: (y, x) forward, (dx, dy) backward.
using UpsampleFn = void(float* out, const float* in, int64_t planes, int64_t H, int64_t W, int factor);
extern Dispatch<UpsampleFn> upsample_nearest_forward_impl;
extern Dispatch<UpsampleFn> upsample_nearest_backward_impl;

}  // namespace hetrain::ops
