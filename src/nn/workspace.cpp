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
  Tensor* best = nullptr;
  for (Tensor& t : pool_)
    if (t.device() == device && !t.storage_shared() && t.numel() >= n && (!best || t.numel() < best->numel()))
      best = &t;
  if (!best) {
    pool_.emplace_back(Shape{std::max<int64_t>(n, 1)}, device);
    best = &pool_.back();
  }
  return best->slice0(0, n).reshape(shape);
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
  for (const Tensor& t : pool_) s += t.numel();
  return s;
}

}  // namespace hetrain::nn
