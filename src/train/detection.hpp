// Training and evaluating a detector (a model whose detect_head() is set): YOLOv5's loss in each local
// step and COCO-style mAP in each validation, the same for every mode and device (docs/detection.md).
// The loss and the decoding are host code (src/detect/): a GPU rank brings the head's rows to the host,
// computes there and sends the gradient back — the rows are small next to the forward pass that made them.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "detect/yolo_loss.hpp"
#include "hetrain/data.hpp"
#include "hetrain/detect.hpp"
#include "hetrain/nn.hpp"
#include "train/batch_source.hpp"
#include "train/batch_stats.hpp"
#include "train/device_step.hpp"
#include "train/evaluate.hpp"

namespace hetrain::train {

// YOLOv5 feeds its detectors pixels / 255: a detector's batches are not standardised by the dataset's mean
// and std, as a classifier's are (docs/detection.md, "Input scaling"), so weights move to and from YOLOv5
// unchanged. Before the source's first batch.
void scale_detector_inputs(BatchSource& source);

// The loss's view of a model's head.
detect::DetectHeadSpec head_spec(const nn::DetectHeadLayout& layout);

// YOLOv5 tunes its learning rate for the gradient of the loss summed over a nominal batch of 64 images
// (train.py's nbs: loss × batch, accumulated to 64). The local step leaves 64 × the gradient of the local
// mean loss; the weighted reduction (b_r/B) then gives 64 × the gradient of the global mean, for any split.
constexpr float kDetectionNominalBatch = 64.0f;

class DetectionLoss {
 public:
  // `label_smoothing` (--label-smoothing): YOLOv5's smooth_BCE, class targets 1 − ε/2 and ε/2 in training;
  // validation losses are unsmoothed, as the classifiers' are.
  explicit DetectionLoss(const nn::DetectHeadLayout& layout, float label_smoothing = 0.0f);
  // rows [b, A, 5 + nc] on any device, `boxes` the b samples' targets. Returns the gradient for the model's
  // backward on rows' device (valid until the next call) and adds b × the loss to *loss_sum. `match_norm`:
  // shared_match_norm's result when ranks share the batch (empty: the local matches).
  Tensor loss_and_gradient(const Tensor& rows, const data::BoxList& boxes, double* loss_sum,
                           const std::vector<double>& match_norm = {});
  // Collective over the ranks that share a batch (`exchange`): per level, what this rank's box and class
  // means divide by, n_l · b / B from the whole batch's matches n_l and samples B, so that the ranks'
  // gradients, weighted b/B, are the whole batch's for any split (docs/detection.md, "Split-independent
  // means"). A rank without samples (b = 0) adds zeros. Needs only the targets: it runs before the forward.
  std::vector<double> shared_match_norm(const data::BoxList& boxes, int64_t b, BatchStatsExchange& exchange) const;
  // Σ over the images of rows already on the host of each image's own loss, without a gradient
  // (validation). Per image, because YOLOv5's loss averages over a batch's matches: a batch's loss would
  // change with how the images are grouped into chunks and ranks.
  double loss_sum(const Tensor& host_rows, const data::BoxList& boxes) const;
  const detect::YoloLoss& yolo() const { return loss_; }

 private:
  detect::YoloLoss loss_;
  Tensor host_grad_, device_grad_;
};

struct DetectionTotals {
  double loss_sum = 0, count = 0;  // Σ over images of the loss, and the images (all ranks)
  detect::MapResult map;           // every rank gets rank 0's result
};

// Collective over `comm`: each rank runs its contiguous share of `source` through the model (inference
// mode, `chunk` images at a time), decodes and suppresses its detections (YOLOv5's validation settings),
// and rank 0 scores all images in dataset order, so the result does not depend on the number of ranks.
// `first_batch` sees rank 0's first chunk: its inputs, labels and head rows (hetrain eval --dump-batch);
// `each_image`, on rank 0, every image's detections after NMS with its index in the dataset (--save-json).
using ImageDetections = std::function<void(int64_t image, const std::vector<detect::Detection>& detections)>;
DetectionTotals evaluate_detection(nn::Model& model, BatchSource& source, DeviceInput* input, MPI_Comm comm,
                                   int64_t chunk, const FirstBatchHook& first_batch = nullptr,
                                   const ImageDetections& each_image = nullptr);

}  // namespace hetrain::train
