// nn/sequential.hpp — a chain of layers; backward runs them in reverse.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "nn/layer.hpp"

namespace hetrain::nn {

class Sequential : public Layer {
 public:
  template <typename L, typename... Args>
  L* add(Args&&... args) {
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L* raw = layer.get();
    layers_.push_back(std::move(layer));
    return raw;
  }
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  bool has_batch_coupling() const override;
  void set_need_input_grad(bool need) override;
  void set_buffer_pool(Workspace* pool) override;
  bool empty() const { return layers_.empty(); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace hetrain::nn
