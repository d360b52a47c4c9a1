// nn/sequential.hpp — a chain of layers; backward runs them in reverse.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "nn/layer.hpp"

namespace hetrain::nn {

class Sequential : public Layer {
 public:
  // A model's top-level chain records where each of its layers' parameters begin in `pb` (layers declare
  // their parameters when constructed, in order), so that backward can say which gradients are final.
  // Call before the first add().
  void track_param_offsets(const ParamBuffer* pb) { tracked_ = pb; }
  template <typename L, typename... Args>
  L* add(Args&&... args) {
    param_begin_.push_back(tracked_ ? tracked_->count() : 0);
    auto layer = std::make_unique<L>(std::forward<Args>(args)...);
    L* raw = layer.get();
    layers_.push_back(std::move(layer));
    return raw;
  }
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  // As backward(dy); on a tracked chain, after layer i's backward, grads_final(offset where layer i's
  // parameters begin): layers i.. own every parameter from there to the end of the buffer.
  Tensor backward(const Tensor& dy, const GradsFinal& grads_final);
  bool has_batch_coupling() const override;
  void set_need_input_grad(bool need) override;
  void set_buffer_pool(Workspace* pool) override;
  bool empty() const { return layers_.empty(); }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  const ParamBuffer* tracked_ = nullptr;
  std::vector<int64_t> param_begin_;  // per layer: the buffer's length before it was constructed
};

}  // namespace hetrain::nn
