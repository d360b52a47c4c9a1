// nn/layer.hpp — the internal layer contract (not public: models are the public face).
//
// A layer declares its parameters into the model's ParamBuffer when it is constructed (names carry the
// layer's prefix, e.g. "layer1.0.conv1.weight") and fetches its views by index at run time, so it works
// after the buffer is finalised (and if the trainer swaps values in place). forward() keeps what backward()
// needs; backward() returns dx, ACCUMULATES parameter gradients into the flat gradient buffer, and lets go
// of what forward kept (so activations are freed as backward walks down the model): one backward per forward.
#pragma once

#include <cstdint>
#include <vector>

#include "hetrain/nn.hpp"
#include "hetrain/precision.hpp"
#include "hetrain/tensor.hpp"
#include "ops/conv2d/conv2d.hpp"

namespace hetrain::nn {

// Memory shared by all layers of one model: the CPU convolutions' scratch (grows to the largest request)
// and a pool of activation/gradient buffers. A pooled tensor is busy while anyone besides the pool holds a
// handle to it (Tensor::storage_shared), so a layer's output lives exactly as long as some
// layer keeps it for backward, and gradients reuse the memory of activations that backward has released
// — instead of every layer owning an output and a gradient buffer for good. Buffers live on the device of
// the request (a model on the GPU pools device memory). Not thread-safe: one model is driven by one thread.
// It also carries the model-wide settings (the precision of GPU convolutions and dense layers,
// hetrain/precision.hpp; where batch norm takes its statistics, --bn), so layers need no second shared object.
class Workspace {
 public:
  // Host scratch for the CPU convolutions.
  ops::HostScratch& scratch() { return scratch_; }
  // A tensor of `shape` (contents unspecified: ops overwrite their outputs) that nobody else holds: the
  // smallest free pooled buffer that fits, else a new one.
  Tensor acquire(const Shape& shape, Device device = Device::CPU);
  // A training step begins (the model's forward calls it): buffers that no request used during the whole
  // previous step are released. After the balancer changes a rank's batch, the buffers of the old size go
  // one step later, so the pool holds one step's set, as the memory cap assumes, not one set per batch size
  // seen. In a steady run every buffer is used every step and nothing is released.
  void begin_step();
  int64_t pooled_floats() const;  // total size of the pool, for tests and diagnostics
  void release_all() { pool_.clear(); }  // e.g. after the model moved to another device
  Precision precision = Precision::FP32;  // GPU convolutions and dense layers (CPU: always FP32)
  const BatchNormMode* batch_norm = nullptr;  // --bn: where batch norm takes its statistics (null: Local)

 private:
  ops::HostScratch scratch_;
  struct Entry {
    Tensor buffer;          // 1-D, owning
    int64_t last_used = 0;  // the step (begin_step count) of its last request
  };
  std::vector<Entry> pool_;
  int64_t step_ = 0;
};

// Model::activation_bytes_per_sample of a model whose layers take every activation and gradient from `pool`:
// one training step at batch 2 and one at batch 4 on zero inputs, each from an empty pool; the pool's growth
// per sample. Leaves the running statistics as they were and the gradients zero.
int64_t measure_activation_bytes_per_sample(Model& model, Workspace& pool);

// Activation buffers are reused from step to step: reallocated only when the shape changes (e.g. the last,
// smaller batch of an epoch). Ops overwrite their outputs, so no zeroing is needed.
inline Tensor& ensure_shape(Tensor& t, const Shape& shape, Device device = Device::CPU) {
  if (!t.defined() || t.shape() != shape || t.device() != device) t = Tensor(shape, device);
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
  // Take outputs and gradients from the model's pool (containers pass it on to every child). Without a
  // pool a layer keeps its own buffers from call to call.
  virtual void set_buffer_pool(Workspace* pool) { pool_ = pool; }

 protected:
  // An output or gradient buffer of `shape` on `device`: from the pool when there is one (then `own` is
  // dropped, so the layer holds nothing it does not need), else the layer's own `own`, reused while the
  // shape stays.
  Tensor buffer(Tensor& own, const Shape& shape, Device device) {
    if (pool_) {
      own = Tensor();
      return pool_->acquire(shape, device);
    }
    return ensure_shape(own, shape, device);
  }
  Precision precision() const { return pool_ ? pool_->precision : Precision::FP32; }
  const BatchNormMode* batch_norm_mode() const { return pool_ ? pool_->batch_norm : nullptr; }
  bool need_dx_ = true;
  Workspace* pool_ = nullptr;
};

}  // namespace hetrain::nn
