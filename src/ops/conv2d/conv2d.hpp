// ops/conv2d — 2-D convolution on any device, with cpu::conv2d_*'s contract (hetrain/ops.hpp): x [N, C, H, W],
// w [K, C, R, S], optional bias [K], y [N, K, P, Q]; backward overwrites dx (when defined) and accumulates
// dw and db. CPU: oneDNN or im2col + GEMM (conv2d_cpu.cpp, dnnl/ in this folder); CUDA: cuDNN
// (src/cuda/conv_cudnn.cpp). Unlike the element-wise ops a convolution keeps state between calls — cuDNN's
// descriptors, chosen algorithms and workspace — so its entry point is an object, one per layer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hetrain/ops.hpp"
#include "hetrain/precision.hpp"
#include "ops/dispatch.hpp"

namespace hetrain::ops {

// Host memory that CPU convolutions use as scratch; grows to the largest request. One per model: the layers
// run one at a time.
class HostScratch {
 public:
  float* get(int64_t floats) {
    if (static_cast<int64_t>(buf_.size()) < floats) buf_.resize(static_cast<size_t>(floats));
    return buf_.data();
  }

 private:
  std::vector<float> buf_;
};

struct Conv2dOptions {
  Precision precision = Precision::FP32;  // GPU only (hetrain/precision.hpp); the CPU computes in FP32
  HostScratch* scratch = nullptr;  // CPU: the scratch to use (required on the CPU)
};

// One device's convolution for one geometry.
class Conv2dKernel {
 public:
  virtual ~Conv2dKernel() = default;
  virtual void forward(float* y, const float* x, const float* w, const float* b) = 0;
  virtual void backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w) = 0;
};
using Conv2dFactoryFn = std::unique_ptr<Conv2dKernel>(const Conv2dGeom& g, const Conv2dOptions& options);
extern Dispatch<Conv2dFactoryFn> conv2d_impl;

// Convolution kernels made so far in this process, on any device: one per layer whenever its input shape
// changes (the balancer moved the batch size). Making one costs far more than a step's share of it — oneDNN
// JIT-compiles code for a new shape, cuDNN measures its algorithms, buffers are first touched — so a step
// during which this count grows is no sample of the rank's speed (the trainers leave it out of the balancer
// and of the speed emulation).
int64_t conv2d_kernels_made();

// The convolution of one layer. The kernel for the tensors' device and geometry is made at first use and
// kept while both stay (the balancer changes N at refits; cuDNN's algorithm choice is cached per shape for
// the process, so a rebuild is cheap after the first).
class Conv2dOp {
 public:
  Conv2dOp(int out_channels, int kernel, int stride, int pad)
      : K_(out_channels), kernel_(kernel), stride_(stride), pad_(pad) {}
  // The geometry for input shape x; throws naming `who` when x is not [N, C, H, W] or too small.
  Conv2dGeom geom(const char* who, const Shape& x) const;
  void forward(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& options);
  void backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                const Tensor& w, const Conv2dOptions& options);

 private:
  Conv2dKernel& kernel_for(Device device, const Conv2dGeom& g, const Conv2dOptions& options);
  int K_, kernel_, stride_, pad_;
  std::unique_ptr<Conv2dKernel> impl_;
  Device impl_device_ = Device::CPU;
  Conv2dGeom impl_geom_;
  Precision impl_precision_ = Precision::FP32;
};

}  // namespace hetrain::ops
