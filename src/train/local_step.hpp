// Forward, loss and backward of one local batch on this rank's device: the part of a training step that
// every mode shares (docs/architecture.md, "Training modes"). What ranks then do with the gradient —
// reduce it with the others' (sync), or step alone and trade with the elastic center (async, hybrid) — is
// the mode's business.
#pragma once

#include <cstdint>
#include <functional>

#include "hetrain/data.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

struct LocalOutcome {
  double loss_sum = 0;  // Σ per-sample loss over the local batch
  double correct = 0;   // top-1 hits
};

class LocalStep {
 public:
  LocalStep(Setup& s, float label_smoothing) : s_(s), label_smoothing_(label_smoothing) {}
  // Leaves in the model's gradient buffer the gradient of the MEAN loss over the b local samples (zeroed
  // first; a detector sharing its batch: B/b × the gradient of its part of the batch's loss, whose means
  // divide by the batch's matches), times `loss_scale` (train/loss_scale.hpp: FP16 ranks backpropagate a scaled loss; the caller
  // takes the factor back out). CPU ranks read `batch`; GPU ranks read `input`, already uploaded. On a GPU,
  // `while_device_computes` runs once the step's kernels are queued, before the loss is read back (the
  // trainer uploads the next batch then); the read-back waits for the device, so timings around run() are
  // real compute time on both devices. `grads_final` hears during backward which gradients are final
  // (nn::GradsFinal: the synchronous mode starts reducing them); it is not called when b = 0. With b = 0
  // the rank still joins the sums of the others' step: a detector's match counts, --bn sync's statistics.
  // With `accumulate` the gradient buffer is not zeroed: this batch's gradient adds to what it holds (the
  // micro-batches of --accumulate).
  LocalOutcome run(const data::Batch& batch, const DeviceInput::Uploaded& input, int64_t b,
                   const std::function<void()>& while_device_computes = {},
                   const nn::GradsFinal& grads_final = {}, float loss_scale = 1.0f, bool accumulate = false);

 private:
  void join_batch_norm_sums();
  Setup& s_;
  float label_smoothing_;
};

}  // namespace hetrain::train
