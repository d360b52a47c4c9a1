// nn/pooling.hpp — max / average pooling (square windows) and global average pooling.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.hpp"
#include "ops/pool/pool.hpp"

namespace hetrain::nn {

class MaxPool2d : public Layer {
 public:
  MaxPool2d(int kernel, int stride, int pad) : kernel_(kernel), stride_(stride), pad_(pad) {}
  Tensor forward(const Tensor& x, bool training) override;  // [N, C, H, W] → [N, C, P, Q]
  Tensor backward(const Tensor& dy) override;
  static int out_size(int in, int kernel, int stride, int pad) { return (in + 2 * pad - kernel) / stride + 1; }

 private:
  ops::PoolWindow window() const { return {kernel_, stride_, pad_}; }
  int kernel_, stride_, pad_;
  Shape in_shape_;
  ops::MaxPoolSaved saved_;  // what backward needs (device-specific)
  Shape y_shape_;
  Tensor y_, dx_;  // own buffers when there is no pool
};

// count_include_pad=True, as PyTorch's default.
class AvgPool2d : public Layer {
 public:
  AvgPool2d(int kernel, int stride, int pad) : kernel_(kernel), stride_(stride), pad_(pad) {}
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;

 private:
  ops::PoolWindow window() const { return {kernel_, stride_, pad_}; }
  int kernel_, stride_, pad_;
  Shape in_shape_;
  Shape y_shape_;
  Tensor x_;       // kept for backward (cuDNN's takes the forward's input)
  Tensor y_, dx_;  // own buffers when there is no pool
};

// [N, C, H, W] → [N, C] (torchvision's AdaptiveAvgPool2d((1, 1)) followed by flatten).
class GlobalAvgPool : public Layer {
 public:
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;

 private:
  Shape in_shape_;
  Shape y_shape_;
  Tensor y_, dx_;  // own buffers when there is no pool
};

// [N, ...] → [N, rest]: a view, no copy.
class Flatten : public Layer {
 public:
  Tensor forward(const Tensor& x, bool) override {
    in_shape_ = x.shape();
    return x.reshape({x.dim(0), x.numel() / (x.dim(0) ? x.dim(0) : 1)});
  }
  Tensor backward(const Tensor& dy) override { return need_dx_ ? dy.reshape(in_shape_) : Tensor(); }

 private:
  Shape in_shape_;
};

}  // namespace hetrain::nn
