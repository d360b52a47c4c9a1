// nn/conv2d.hpp — 2-D convolution layer: weight [K, C, R, R], optional bias [K].
#pragma once

#include <memory>
#include <string>

#include "hetrain/cuda.hpp"
#include "nn/layer.hpp"

namespace hetrain::nn {

class Conv2d : public Layer {
 public:
  // Declares "<name>.weight" (and "<name>.bias" when bias is true).
  Conv2d(ParamBuffer& pb, const std::string& name, int in_channels, int out_channels, int kernel, int stride,
         int pad, bool bias, Workspace* ws);
  Tensor forward(const Tensor& x, bool training) override;  // x [N, C, H, W] → [N, K, P, Q]
  Tensor backward(const Tensor& dy) override;                // dy [N, K, P, Q] → dx [N, C, H, W]
  static int out_size(int in, int kernel, int stride, int pad) { return (in + 2 * pad - kernel) / stride + 1; }

 private:
  ParamBuffer* pb_;
  std::string name_;
  int C_, K_, kernel_, stride_, pad_;
  int w_ = -1, b_ = -1;
  Workspace* ws_;
  Tensor x_, y_, dx_;  // x_: kept for backward; y_, dx_: own buffers when there is no pool
  Shape y_shape_;
  // On the GPU: cuDNN descriptors and workspace for the current input shape, rebuilt when it changes (the
  // balancer changes N at refits; the algorithm choice itself is cached per shape for the process).
  cuda::CudnnConv2d& cudnn_for(const cpu::Conv2dGeom& g);
  std::unique_ptr<cuda::CudnnConv2d> cudnn_;
  cpu::Conv2dGeom cudnn_geom_;
};

}  // namespace hetrain::nn
