// Evaluation: a model in inference mode over a dataset, each rank a contiguous share. One loss path for
// every device: the logits come to the host, where the CPU loss, top-1 and top-5 are computed (the logits
// of a batch are small next to the forward pass that made them).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>

#include "hetrain/nn.hpp"
#include "train/batch_source.hpp"
#include "train/device_step.hpp"

namespace hetrain::train {

struct EvalTotals {
  double loss_sum = 0, top1 = 0, top5 = 0, count = 0;  // summed over samples (and ranks after evaluate())
  double map50 = -1, map50_95 = -1;  // detectors (train/detection.hpp): COCO mAP; -1 for classifiers
  bool detection() const { return map50 >= 0; }
  // The score part of a validation line: "accuracy 91.20%", or "mAP@0.5 0.512, mAP@0.5:0.95 0.301".
  std::string score_text() const;
  // What TrainResult::val_accuracy reports: top-1 accuracy, or mAP@0.5 for a detector.
  double headline() const;
};

// Sees rank 0's first batch: the inputs the model took (float [n, C, H, W] on the host), the labels and
// the model's outputs on the host: a classifier's logits [n, K], a detector's head rows [n, A, 5 + nc].
using FirstBatchHook = std::function<void(const Tensor& inputs, const std::vector<int32_t>& labels,
                                          const Tensor& logits)>;

// Runs this rank's contiguous share of `source` (ranks of `comm` in order) through the model in inference
// mode, `chunk` samples at a time without augmentation, and hands each batch and the model's output,
// brought to the host, to `use`. Returns the number of samples of the share. Collective: when any rank's
// outputs hold NaN/Inf, every rank throws the same AgreedError naming the first such sample, and `use` never
// sees those outputs (no metric is computed over non-finite scores; docs/architecture.md, "Failures").
int64_t for_each_eval_batch(nn::Model& model, BatchSource& source, DeviceInput* input, MPI_Comm comm,
                            int64_t chunk,
                            const std::function<void(const data::Batch& batch, const Tensor& images,
                                                     const Tensor& host_outputs)>& use);

// Collective over `comm`. `input` uploads batches for a model on a GPU (null on the CPU). Samples go
// through the model `chunk` at a time without augmentation. A detector is scored by evaluate_detection
// (train/detection.hpp): loss and mAP, no top-1.
EvalTotals evaluate(nn::Model& model, BatchSource& source, DeviceInput* input, MPI_Comm comm, int64_t chunk,
                    const FirstBatchHook& first_batch = nullptr);

// Rank 0's line for a validation during training, the same in every mode (bench/modes.sh reads it):
// "validation at sample S (epoch E) after T s of training: loss L, accuracy A% (N samples)" (a detector's
// line has its mAP in place of the accuracy). T leaves out the time spent validating.
void print_validation(int64_t samples_done, int64_t samples_per_epoch, double train_seconds, const EvalTotals& e);

// Samples whose label is among the k largest logits (ties count against the label). logits [N, K].
int64_t topk_correct(const float* logits, const int32_t* labels, int64_t N, int K, int k);

}  // namespace hetrain::train
