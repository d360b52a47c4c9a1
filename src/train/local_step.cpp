#include "train/local_step.hpp"

#include "hetrain/ops.hpp"
#include "ops/scale/scale.hpp"

namespace hetrain::train {

LocalOutcome LocalStep::run(const data::Batch& batch, const DeviceInput::Uploaded& input, int64_t b,
                            const std::function<void()>& while_device_computes,
                            const nn::GradsFinal& grads_final, float loss_scale) {
  LocalOutcome out;
  s_.model->params().grads().zero();
  if (b == 0) return out;  // a rank with no share this step still takes part in the exchange
  const bool on_gpu = s_.device_kind == Device::CUDA;
  if (s_.detection) {  // the loss runs on the host for every device (train/detection.hpp)
    Tensor rows = s_.model->forward(on_gpu ? input.images : batch.images, /*training=*/true);
    const data::BoxList& boxes = on_gpu ? input.boxes : batch.boxes;
    Tensor drows = s_.detection->loss_and_gradient(rows, boxes, &out.loss_sum);
    if (loss_scale != 1.0f) ops::scale(drows, loss_scale);
    s_.model->backward(drows, grads_final);
    if (on_gpu && while_device_computes) while_device_computes();
    return out;
  }
  if (on_gpu) {
    Tensor logits = s_.model->forward(input.images, /*training=*/true);
    s_.model->backward(s_.loss->compute(logits, input.labels, label_smoothing_, true, loss_scale), grads_final);
    if (while_device_computes) while_device_computes();
    s_.loss->read(&out.loss_sum, &out.correct);
    return out;
  }
  const int K = s_.train->info().num_classes;
  Tensor logits = s_.model->forward(batch.images, /*training=*/true);
  Tensor probs({b, K}), dlogits({b, K});
  const float loss =
      cpu::softmax_xent_forward(probs.data(), logits.data(), batch.labels.data(), int(b), K, label_smoothing_);
  out.correct = double(cpu::top1_correct(logits.data(), batch.labels.data(), int(b), K));
  out.loss_sum = double(loss) * double(b);
  cpu::softmax_xent_backward(dlogits.data(), probs.data(), batch.labels.data(), int(b), K, label_smoothing_,
                             loss_scale / float(b));
  s_.model->backward(dlogits, grads_final);
  return out;
}

}  // namespace hetrain::train
