// nn/layer.hpp — the internal layer contract (not public: models are the public face).
//
// A layer declares its parameters into the model's ParamBuffer when it is constructed (names carry the
// layer's prefix, e.g. "layer1.0.conv1.weight") and fetches its views by index at run time, so it works
// after the buffer is finalised (and if the trainer swaps values in place). forward() keeps what backward()
// needs; backward() returns dx and ACCUMULATES parameter gradients into the flat gradient buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "hetrain/nn.hpp"
#include "hetrain/tensor.hpp"

namespace hetrain::nn {

// Scratch memory shared by all layers of one model (im2col columns); grows to the largest request.
class Workspace {
 public:
  float* get(int64_t floats) {
    if (static_cast<int64_t>(buf_.size()) < floats) buf_.resize(static_cast<size_t>(floats));
    return buf_.data();
  }

 private:
  std::vector<float> buf_;
};

// Activation buffers are reused from step to step: reallocated only when the shape changes (e.g. the last,
// smaller batch of an epoch). Ops overwrite their outputs, so no zeroing is needed.
inline Tensor& ensure_shape(Tensor& t, const Shape& shape) {
  if (!t.defined() || t.shape() != shape) t = Tensor(shape);
  return t;
}

class Layer {
 public:
  virtual ~Layer() = default;
  // The returned tensor stays valid until the next forward() of this layer.
  virtual Tensor forward(const Tensor& x, bool training) = 0;
  // dy has the shape of the last forward's output. Returns dx, or an undefined tensor when the input
  // gradient is not needed (first layer of a model).
  virtual Tensor backward(const Tensor& dy) = 0;
  virtual bool has_batch_coupling() const { return false; }
  // Containers forward this to their first child.
  virtual void set_need_input_grad(bool need) { need_dx_ = need; }

 protected:
  bool need_dx_ = true;
};

}  // namespace hetrain::nn
