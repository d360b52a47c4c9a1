// nn/batchnorm2d.hpp — batch normalisation over (N, H, W) per channel, as torch.nn.BatchNorm2d.
//
// Parameters "<name>.weight" (γ) and "<name>.bias" (β); states "<name>.running_mean" (0) and
// "<name>.running_var" (1). Training mode normalises with batch statistics and updates the running ones
// (momentum 0.1, unbiased variance); eval mode uses the running statistics.
#pragma once

#include <string>

#include "nn/layer.hpp"

namespace hetrain::nn {

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(ParamBuffer& pb, const std::string& name, int channels, float momentum = 0.1f, float eps = 1e-5f);
  Tensor forward(const Tensor& x, bool training) override;  // x [N, C, H, W] → same shape
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override { return true; }

 private:
  ParamBuffer* pb_;
  std::string name_;
  int C_;
  float momentum_, eps_;
  int gamma_, beta_, mean_, var_;
  Tensor x_, save_mean_, save_invstd_;  // what backward needs (x_: the input)
  Tensor y_, dx_;                      // own buffers when there is no pool
  bool trained_forward_ = false;  // backward needs the batch statistics of a training forward
};

}  // namespace hetrain::nn
