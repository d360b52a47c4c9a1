// nn/unary_layer.hpp — the layer of every element-wise op of one input (ops/common/unary.hpp): it runs
// the op's forward and keeps what the op's backward reads (the input, or the output). A new activation is
// one line in the YAML module table (nn/graph_model.cpp) over its op, or a one-line subclass here when C++
// code builds it by name.
#pragma once

#include "nn/layer.hpp"
#include "ops/common/unary.hpp"

namespace hetrain::nn {

class UnaryLayer : public Layer {
 public:
  // `name` starts its error messages, e.g. "SiLU".
  UnaryLayer(const ops::UnaryOp& op, const char* name) : op_(op), name_(name) {}
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;

 private:
  const ops::UnaryOp& op_;
  const char* name_;
  Tensor saved_;   // what backward reads, until it has run
  Tensor y_, dx_;  // own buffers when there is no pool
};

// y = max(x, 0) (ops/relu): keeps its output (backward needs only y > 0).
class ReLU final : public UnaryLayer {
 public:
  ReLU();
};

// y = x·σ(x) (ops/silu), YOLOv5's activation: keeps its input.
class SiLU final : public UnaryLayer {
 public:
  SiLU();
};

}  // namespace hetrain::nn
