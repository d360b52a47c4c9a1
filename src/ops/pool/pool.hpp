// ops/pool — max, average and global average pooling on any device. CPU: cpu::*pool* (src/ops/pool/pool_cpu.cpp);
// CUDA: cuDNN pooling (src/cuda/pool2d_cudnn.cpp) and kernels/pool.cu. Square windows, floor
// output size, pad ≤ kernel/2; average pooling counts padding as zeros (PyTorch's count_include_pad=True).
#pragma once

#include <cstdint>
#include <vector>

#include "hetrain/ops.hpp"
#include "ops/dispatch.hpp"

namespace hetrain::ops {

struct PoolWindow {
  int kernel = 2, stride = 2, pad = 0;
};
// The geometry of `window` over x [N, C, H, W]; throws naming `op` when x is not 4-D or too small.
Pool2dGeom pool_geom(const char* op, const Shape& x, const PoolWindow& window);
Shape pool_output_shape(const char* op, const Shape& x, const PoolWindow& window);  // [N, C, P, Q]

// What max pooling's backward needs from its forward, which differs by device: the CPU keeps where each
// maximum came from, cuDNN finds them again from the forward's input and output.
struct MaxPoolSaved {
  Pool2dGeom geom;
  std::vector<int32_t> argmax;  // CPU
  Tensor x, y;                  // CUDA
  bool valid = false;
};
// y = max over each window of x. With `for_backward`, `saved` keeps what maxpool2d_backward needs.
void maxpool2d_forward(const Tensor& y, const Tensor& x, const PoolWindow& window, MaxPoolSaved& saved,
                       bool for_backward);
// dx (overwritten) gets each dy at its window's maximum; lets go of `saved`.
void maxpool2d_backward(const Tensor& dx, const Tensor& dy, MaxPoolSaved& saved);

// x is the forward's input (cuDNN's backward reads it; the CPU does not).
void avgpool2d_forward(const Tensor& y, const Tensor& x, const PoolWindow& window);
void avgpool2d_backward(const Tensor& dx, const Tensor& dy, const Tensor& x, const PoolWindow& window);

// y [N, C] = mean of x [N, C, H, W] over H·W; backward spreads dy evenly (dx overwritten).
void global_avgpool_forward(const Tensor& y, const Tensor& x);
void global_avgpool_backward(const Tensor& dx, const Tensor& dy);

using MaxPoolForwardFn = void(const Tensor& y, const Tensor& x, MaxPoolSaved& saved, bool for_backward);
using MaxPoolBackwardFn = void(const Tensor& dx, const Tensor& dy, MaxPoolSaved& saved);
using AvgPoolForwardFn = void(float* y, const float* x, const Pool2dGeom& g);
using AvgPoolBackwardFn = void(float* dx, const float* dy, const float* x, const Pool2dGeom& g);
using GlobalPoolFn = void(float* out, const float* in, int N, int C, int HW);
extern Dispatch<MaxPoolForwardFn> maxpool2d_forward_impl;
extern Dispatch<MaxPoolBackwardFn> maxpool2d_backward_impl;
extern Dispatch<AvgPoolForwardFn> avgpool2d_forward_impl;
extern Dispatch<AvgPoolBackwardFn> avgpool2d_backward_impl;
extern Dispatch<GlobalPoolFn> global_avgpool_forward_impl;
extern Dispatch<GlobalPoolFn> global_avgpool_backward_impl;

}  // namespace hetrain::ops
