// nn/batchnorm2d.hpp — batch normalisation over (N, H, W) per channel, as torch.nn.BatchNorm2d.
//
// Parameters "<name>.weight" (γ) and "<name>.bias" (β); states "<name>.running_mean" (0) and
// "<name>.running_var" (1). Training mode normalises with batch statistics and updates the running ones
// (momentum 0.1, unbiased variance); eval mode uses the running statistics. Which batch the statistics
// are over is the model's BatchNormMode (hetrain/nn.hpp, --bn): the local batch, the global batch (sync),
// or groups of G samples (ghost); docs/architecture.md, "Batch norm".
#pragma once

#include <string>
#include <vector>

#include "nn/layer.hpp"

namespace hetrain::nn {

class BatchNorm2d : public Layer {
 public:
  BatchNorm2d(ParamBuffer& pb, const std::string& name, int channels, float momentum = 0.1f, float eps = 1e-5f);
  Tensor forward(const Tensor& x, bool training) override;  // x [N, C, H, W] → same shape
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override { return true; }

 private:
  void forward_local(const Tensor& y, const Tensor& x);
  void forward_ghost(const Tensor& y, const Tensor& x, int64_t group);
  void forward_sync(const Tensor& y, const Tensor& x, const BatchNormMode& mode);
  void backward_ghost(const Tensor& dx, const Tensor& dy);
  void backward_sync(const Tensor& dx, const Tensor& dy, const BatchNormMode& mode);
  ParamBuffer* pb_;
  std::string name_;
  int C_;
  float momentum_, eps_;
  int gamma_, beta_, mean_, var_;
  Tensor x_, save_mean_, save_invstd_;  // what backward needs (x_: the input; ghost: [groups, C] statistics)
  Tensor y_, dx_;                      // own buffers when there is no pool
  Tensor channel_a_, channel_b_;       // per-channel scratch on the layer's device (ghost, sync)
  bool trained_forward_ = false;  // backward needs the batch statistics of a training forward
  // How the last training forward took its statistics (backward follows it).
  BatchNormMode::Kind kind_ = BatchNormMode::Kind::Local;
  int64_t group_ = 0;            // ghost: samples per group
  double global_values_ = 0;     // sync: values per channel over the global batch
};

}  // namespace hetrain::nn
