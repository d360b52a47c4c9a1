// nn/conv2d.hpp — 2-D convolution layer: weight [K, C, R, R], optional bias [K].
#pragma once

#include <string>

#include "nn/layer.hpp"
#include "ops/conv2d/conv2d.hpp"

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
  ops::Conv2dOptions options() const;
  ParamBuffer* pb_;
  std::string name_;
  int C_, K_, kernel_;
  int w_ = -1, b_ = -1;
  Workspace* ws_;
  ops::Conv2dOp conv_;  // keeps the device's plan for the current input shape (cuDNN on the GPU)
  Tensor x_, y_, dx_;   // x_: kept for backward; y_, dx_: own buffers when there is no pool
  Shape y_shape_;
};

}  // namespace hetrain::nn
