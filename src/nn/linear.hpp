// nn/linear.hpp — fully connected layer: weight [O, I], bias [O] (torch.nn.Linear).
#pragma once

#include <string>

#include "nn/layer.hpp"
#include "ops/linear/linear.hpp"

namespace hetrain::nn {

class Linear : public Layer {
 public:
  // Declares "<name>.weight" and "<name>.bias".
  Linear(ParamBuffer& pb, const std::string& name, int in_features, int out_features);
  Tensor forward(const Tensor& x, bool training) override;  // x [N, I] → [N, O]
  Tensor backward(const Tensor& dy) override;                // dy [N, O] → dx [N, I]

 private:
  ops::LinearOptions options() const;
  ParamBuffer* pb_;
  std::string name_;
  int I_, O_;
  int w_, b_;
  Tensor x_;          // kept for backward
  Shape y_shape_;
  Tensor y_, dx_;     // own buffers when there is no pool
};

}  // namespace hetrain::nn
