#include "train/local_step.hpp"

#include "hetrain/ops.hpp"
#include "ops/scale/scale.hpp"

namespace hetrain::train {

LocalOutcome LocalStep::run(const data::Batch& batch, const DeviceInput::Uploaded& input, int64_t b,
                            const std::function<void()>& while_device_computes,
                            const nn::GradsFinal& grads_final, float loss_scale, bool accumulate) {
  LocalOutcome out;
  if (!accumulate) s_.model->params().grads().zero();
  const bool on_gpu = s_.device_kind == Device::CUDA;
  const data::BoxList& boxes = on_gpu ? input.boxes : batch.boxes;
  // A detector's box and class means divide by the whole batch's matches (train/detection.hpp); a rank
  // without samples adds zeros.
  std::vector<double> match_norm;
  if (s_.detection && s_.batch_exchange) match_norm = s_.detection->shared_match_norm(boxes, b, *s_.batch_exchange);
  if (b == 0) {  // a rank with no share this step still takes part in the batch-norm sums
    if (s_.batch_exchange && s_.batch_norm->kind == nn::BatchNormMode::Kind::Sync) join_batch_norm_sums();
    return out;
  }
  if (s_.detection) {  // the loss runs on the host for every device (train/detection.hpp)
    Tensor rows = s_.model->forward(on_gpu ? input.images : batch.images, /*training=*/true);
    Tensor drows = s_.detection->loss_and_gradient(rows, boxes, &out.loss_sum, match_norm);
    if (loss_scale != 1.0f) ops::scale(drows, loss_scale);
    s_.model->backward(drows, grads_final);
    if (on_gpu && while_device_computes) while_device_computes();
    return out;
  }
  // Classifiers: softmax cross-entropy on the rank's device (ops/softmax_xent); on a GPU the loss and the
  // correct count are read back once the rest of the step is queued.
  Tensor logits = s_.model->forward(on_gpu ? input.images : batch.images, /*training=*/true);
  const int32_t* labels = on_gpu ? input.labels : batch.labels.data();
  s_.model->backward(s_.loss->compute(logits, labels, label_smoothing_, true, loss_scale), grads_final);
  if (on_gpu && while_device_computes) while_device_computes();
  s_.loss->read(&out.loss_sum, &out.correct);
  return out;
}

// --bn sync: every rank that shares the batch sums its statistics in every batch-norm layer, in forward
// and backward. A rank without samples runs one zero sample and a zero gradient through the model; its
// layers add zeros to the sums (BatchNormMode::no_samples) and its parameter gradients stay zero.
void LocalStep::join_batch_norm_sums() {
  const nn::ModelConfig& c = s_.model->config();
  Tensor zero({1, c.in_channels, c.height, c.width}, s_.device_kind);
  zero.zero();
  const Tensor out = s_.model->forward(zero, /*training=*/true);
  Tensor dout(out.shape(), s_.device_kind);
  dout.zero();
  s_.model->backward(dout);
}

}  // namespace hetrain::train
