// nn/relu.hpp — ReLU layer (keeps its output: relu's backward needs only out > 0).
#pragma once

#include "nn/layer.hpp"

namespace hetrain::nn {

class ReLU : public Layer {
 public:
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;

 private:
  Tensor y_;   // the output, kept for backward
  Tensor dx_;  // own gradient buffer when there is no pool
};

}  // namespace hetrain::nn
