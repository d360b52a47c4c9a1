// detect/yolo_loss.hpp — YOLOv5's detection loss and target assignment (its ComputeLoss and build_targets,
// v6/v7), one unit shared by training and evaluation.
// Plain host code, no device. docs/detection.md, "Loss and targets", explains the layout, the matching,
// the loss terms, the hyperparameter scaling and where this differs from YOLOv5.
//
// Prediction layout (what a Detect head produces): float pred[N, A, no], A = rows_per_image(),
// no = outputs() = 5 + num_classes. Rows of an image are ordered level, then anchor, then grid row y, then
// column x (YOLOv5's per-level tensors [N, na, gh, gw, no] laid end to end per image). Fields of a row:
// tx, ty, tw, th, obj, cls_0 … cls_{nc-1}, all raw logits (no sigmoid applied).
#pragma once

#include <cstdint>
#include <vector>

#include "hetrain/data.hpp"
#include "hetrain/nn.hpp"

namespace hetrain::detect {

// A Detect head's layout (nn::DetectHeadLayout: num_classes, anchors_per_level na, strides per level,
// anchors in pixels as levels·na (w, h) pairs, level 0's first, and the network's input size image_h ×
// image_w, a multiple of every stride), with the arithmetic the loss and the decoding need.
struct DetectHeadSpec : nn::DetectHeadLayout {
  DetectHeadSpec() = default;
  explicit DetectHeadSpec(const nn::DetectHeadLayout& layout) : nn::DetectHeadLayout(layout) {}

  int levels() const { return int(strides.size()); }
  int grid_h(int level) const { return image_h / strides[level]; }
  int grid_w(int level) const { return image_w / strides[level]; }
  int outputs() const { return 5 + num_classes; }  // no
  int64_t level_rows(int level) const { return int64_t(anchors_per_level) * grid_h(level) * grid_w(level); }
  int64_t rows_per_image() const;         // A = Σ_l na·gh·gw
  int64_t level_offset(int level) const;  // first row of `level` within an image
  // Row of (level, anchor a, cell y, x) within an image.
  int64_t row(int level, int a, int y, int x) const {
    return level_offset(level) + (int64_t(a) * grid_h(level) + y) * grid_w(level) + x;
  }
  float anchor_w(int level, int a) const { return anchors[size_t(level * anchors_per_level + a) * 2]; }
  float anchor_h(int level, int a) const { return anchors[size_t(level * anchors_per_level + a) * 2 + 1]; }
  // Throws hetrain::Error naming the first inconsistency (sizes, counts, a stride that does not divide the
  // image).
  void validate() const;
};

// YOLOv5's P3–P5 head (models/yolov5*.yaml): strides 8, 16, 32 and its default anchors.
DetectHeadSpec yolov5_head(int num_classes, int image_h, int image_w);

// YOLOv5's default hyperparameters for the loss, before its training script's scaling (docs/detection.md).
struct YoloLossConfig {
  float anchor_t = 4.0f;       // a target matches an anchor when both w and h ratios are within this factor
  std::vector<float> balance;  // objectness weight per level; empty = default_balance(levels)
  float box_gain = 0.05f;
  float obj_gain = 1.0f;
  float cls_gain = 0.5f;
  float label_smoothing = 0.0f;  // class targets 1 − ls/2 and ls/2
};
// YOLOv5's objectness balance: {4, 1, 0.4} for 3 levels, else the first `levels` of {4, 1, 0.25, 0.06, 0.02}.
std::vector<float> default_balance(int levels);
// train.py's scaling of the gains to the head (YOLOv5 tuned them for 3 levels, 80 classes, 640 px):
// box ·= 3/nl, cls ·= nc/80 · 3/nl, obj ·= (h·w/640²) · 3/nl. For a square image h·w/640² is YOLOv5's
// (imgsz/640)². Apply it once; the result is what YoloLoss should get.
YoloLossConfig scaled_for(const YoloLossConfig& cfg, const DetectHeadSpec& spec);
inline YoloLossConfig scaled_for(const DetectHeadSpec& spec) { return scaled_for(YoloLossConfig(), spec); }

// One target row of build_targets: a box assigned to (image, anchor, cell) of a level.
struct TargetMatch {
  int64_t image = 0;
  int anchor = 0, gx = 0, gy = 0;  // cell, clamped to the grid
  int cls = 0;
  float tx = 0, ty = 0, tw = 0, th = 0;  // box in grid units, centre relative to the cell's corner
  int64_t box = 0;                       // the row in the BoxList it came from
};
// build_targets of every level, each in YOLOv5's order (offset, then anchor, then box). Checks `targets`
// against the head (one line naming the problem) and that it holds `images` samples.
std::vector<std::vector<TargetMatch>> build_targets(const DetectHeadSpec& spec, float anchor_t,
                                                    const data::BoxList& targets, int64_t images);

// CIoU of a predicted and a target box, both (cx, cy, w, h), as YOLOv5's bbox_iou(CIoU=True), eps 1e-7.
// alpha is what YOLOv5 computes under no_grad: the gradient treats it as a constant.
struct Ciou {
  double ciou = 0, iou = 0, alpha = 0;
};
Ciou ciou(const double pred[4], const double target[4]);
// d ciou / d pred[0..3] with alpha held fixed, multiplied by `scale`, written to grad[4].
void ciou_backward(const double pred[4], const double target[4], double alpha, double scale, double grad[4]);

class YoloLoss {
 public:
  YoloLoss(DetectHeadSpec spec, YoloLossConfig cfg);  // validates both

  struct Result {
    double total = 0;        // box + obj + cls: the loss compute() differentiates
    double total_batch = 0;  // total · N, what YOLOv5's ComputeLoss returns and train.py backpropagates
    double box = 0, obj = 0, cls = 0;  // gain-weighted components, as YOLOv5 logs lbox, lobj, lcls
    int64_t matched = 0;               // target rows over all levels (one per box, anchor and cell)
  };
  // The quantities YOLOv5 detaches: each match's CIoU alpha (levels in order, each in build_targets'
  // order) and each row's objectness target [N·A]. compute() records them; compute_fixed() takes them as
  // constants, so finite differences of its total check compute()'s gradient.
  struct Detached {
    std::vector<double> alpha, tobj;
  };

  // pred [N, A, no] (layout above); targets: N samples. dpred [N, A, no] (null: no gradient) is
  // overwritten with grad_scale · d(total)/d(pred); zero where no loss flows. N = 0 gives a zero Result
  // and writes nothing. Pass grad_scale = N (or the global batch B, when the reducer scales by b_r/B) for
  // YOLOv5's gradient, which is that of total_batch. Deterministic: the same bits for any thread count.
  // `match_norm` (empty: this batch's own match counts, as YOLOv5) gives per level the count that the box
  // and class means divide by; a rank holding b of a batch of B split over ranks passes n_l · b / B, with
  // n_l the whole batch's matches, so that the ranks' results weighted b/B add up to the whole batch's
  // (docs/detection.md, "Split-independent means").
  Result compute(const float* pred, int64_t N, const data::BoxList& targets, float* dpred, float grad_scale,
                 Detached* detached = nullptr, const std::vector<double>& match_norm = {}) const;
  Result compute_fixed(const float* pred, int64_t N, const data::BoxList& targets, const Detached& fixed,
                       const std::vector<double>& match_norm = {}) const;
  // Per level, the matches (target rows) of N samples' targets: what a split batch's ranks add up.
  std::vector<int64_t> level_matches(const data::BoxList& targets, int64_t N) const;

  const DetectHeadSpec& spec() const { return spec_; }
  const YoloLossConfig& config() const { return cfg_; }

 private:
  Result evaluate(const float* pred, int64_t N, const data::BoxList& targets, float* dpred, float grad_scale,
                  Detached& detached, bool fixed, const std::vector<double>& match_norm) const;
  DetectHeadSpec spec_;
  YoloLossConfig cfg_;
};

}  // namespace hetrain::detect
