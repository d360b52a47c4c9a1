// nn/residual.hpp — torchvision's residual blocks.
//
//   BasicBlock:  out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))      3×3, 3×3
//   Bottleneck:  out = relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + shortcut(x))
//                1×1 → 3×3 (stride here: "ResNet v1.5") → 1×1 with 4× expansion
// shortcut is the identity, or "downsample" = 1×1 conv (stride s, no bias) + BN when the shape changes;
// names follow torchvision: "<prefix>.conv1.weight", "<prefix>.downsample.0.weight", "<prefix>.downsample.1.*".
#pragma once

#include <string>

#include "nn/sequential.hpp"

namespace hetrain::nn {

class ResidualBlock : public Layer {
 public:
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override { return true; }
  void set_buffer_pool(Workspace* pool) override;

 protected:
  ResidualBlock() = default;
  // Adds the 1×1 conv + BN projection "<prefix>.downsample.{0,1}" when stride != 1 or in != out.
  void make_shortcut(ParamBuffer& pb, const std::string& prefix, int in, int out, int stride, Workspace* ws);
  Sequential main_;      // conv/bn/relu chain without the final relu
  Sequential shortcut_;  // empty = identity

 private:
  Tensor y_;           // the output, kept for backward (the ReLU mask)
  Tensor dmain_, dx_;  // own gradient buffers when there is no pool
};

class BasicBlock : public ResidualBlock {
 public:
  static constexpr int kExpansion = 1;
  BasicBlock(ParamBuffer& pb, const std::string& prefix, int in, int planes, int stride, Workspace* ws);
};

class Bottleneck : public ResidualBlock {
 public:
  static constexpr int kExpansion = 4;
  Bottleneck(ParamBuffer& pb, const std::string& prefix, int in, int planes, int stride, Workspace* ws);
};

}  // namespace hetrain::nn
