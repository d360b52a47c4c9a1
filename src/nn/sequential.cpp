// nn/sequential.cpp
#include "nn/sequential.hpp"

#include "hetrain/nn.hpp"

namespace hetrain::nn {
namespace {
std::function<void()> g_between_layers;
}

void set_between_layers_hook(std::function<void()> hook) { g_between_layers = std::move(hook); }

Tensor Sequential::forward(const Tensor& x, bool training) {
  Tensor h = x;
  for (auto& l : layers_) {
    h = l->forward(h, training);
    if (g_between_layers) g_between_layers();
  }
  return h;
}

Tensor Sequential::backward(const Tensor& dy) { return backward(dy, GradsFinal()); }

Tensor Sequential::backward(const Tensor& dy, const GradsFinal& grads_final) {
  const bool report = grads_final && tracked_;
  Tensor g = dy;
  for (size_t i = layers_.size(); i-- > 0;) {
    g = layers_[i]->backward(g);
    if (report) grads_final(param_begin_[i]);
    if (g_between_layers) g_between_layers();
  }
  return g;
}

bool Sequential::has_batch_coupling() const {
  for (const auto& l : layers_)
    if (l->has_batch_coupling()) return true;
  return false;
}

void Sequential::set_buffer_pool(Workspace* pool) {
  pool_ = pool;
  for (auto& l : layers_) l->set_buffer_pool(pool);
}

void Sequential::set_need_input_grad(bool need) {
  need_dx_ = need;
  if (!layers_.empty()) layers_.front()->set_need_input_grad(need);
}

}  // namespace hetrain::nn
