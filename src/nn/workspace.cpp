// nn/workspace.cpp — the model's buffer pool (see layer.hpp).
#include <algorithm>

#include "hetrain/error.hpp"
#include "nn/layer.hpp"

namespace hetrain::nn {

Tensor Workspace::acquire(const Shape& shape, Device device) {
  const int64_t n = shape_numel(shape);
  HT_CHECK(n >= 0, "workspace: bad shape ", shape_str(shape));
  // Best fit among free buffers. The requests repeat step after step, so after the first step or two the
  // pool stops growing and every request is served without allocating (or zero-filling) memory.
  Entry* best = nullptr;
  for (Entry& e : pool_) {
    const Tensor& t = e.buffer;
    if (t.device() == device && !t.storage_shared() && t.numel() >= n && (!best || t.numel() < best->buffer.numel()))
      best = &e;
  }
  if (!best) {
    pool_.push_back(Entry{Tensor(Shape{std::max<int64_t>(n, 1)}, device), step_});
    best = &pool_.back();
  }
  best->last_used = step_;
  return best->buffer.slice0(0, n).reshape(shape);
}

void Workspace::begin_step() {
  ++step_;
  pool_.erase(std::remove_if(pool_.begin(), pool_.end(),
                             [&](const Entry& e) { return e.last_used < step_ - 1 && !e.buffer.storage_shared(); }),
              pool_.end());
}

int64_t measure_activation_bytes_per_sample(Model& model, Workspace& pool) {
  const ModelConfig& c = model.config();
  ParamBuffer& params = model.params();
  const Tensor saved_states = params.states().clone();  // training forwards move the running statistics
  // Batch norm over the local batch: a measurement of one rank must not wait for the others' sums.
  struct LocalBatchNorm {
    Workspace& pool;
    const BatchNormMode* saved = pool.batch_norm;
    ~LocalBatchNorm() { pool.batch_norm = saved; }
  } local{pool};
  pool.batch_norm = nullptr;
  int64_t pooled[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t batch = 2 << i;  // 2 and 4: batch norm needs more than one value per channel
    pool.release_all();
    Tensor out = model.forward(Tensor({batch, c.in_channels, c.height, c.width}, model.device()), true);
    model.backward(Tensor(out.shape(), model.device()));
    pooled[i] = pool.pooled_floats();
  }
  pool.release_all();
  params.grads().zero();
  params.states().copy_from(saved_states);
  return std::max<int64_t>(0, pooled[1] - pooled[0]) * int64_t(sizeof(float)) / 2;
}

int64_t Workspace::pooled_floats() const {
  int64_t s = 0;
  for (const Entry& e : pool_) s += e.buffer.numel();
  return s;
}

}  // namespace hetrain::nn
