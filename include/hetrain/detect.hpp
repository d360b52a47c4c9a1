// hetrain/detect.hpp — scoring object detectors: per-class non-maximum suppression and COCO-style mean
// average precision (docs/detection.md, "Evaluation"). Plain host code on boxes; no model, no device.
//
// Conventions: a box is its corners (x0, y0, x1, y1) with x0 ≤ x1, y0 ≤ y1, in any unit as long as the
// detections and ground truths of an image share it (the dataset's normalised cx, cy, w, h convert with
// box_from_cxcywh). Classes are integers in [0, num_classes).
#pragma once

#include <cstdint>
#include <vector>

namespace hetrain::detect {

struct Box {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};
Box box_from_cxcywh(float cx, float cy, float w, float h);
// Intersection over union, computed in double; 0 when the union is empty.
double iou(const Box& a, const Box& b);

struct Detection {
  Box box;
  float score = 0;
  int cls = 0;
};
struct GroundTruth {
  Box box;
  int cls = 0;
};

// YOLOv5's validation settings (docs/detection.md).
struct NmsConfig {
  float conf_threshold = 0.001f;  // candidates with score <= this are dropped first
  float iou_threshold = 0.6f;     // a box whose IoU with a kept box of its class is above this is suppressed
  int max_detections = 300;       // per image, the best-scoring kept boxes
};
// Per class, greedily in decreasing score: keep the best box, suppress those overlapping it by more than
// iou_threshold, repeat; then the max_detections best of all classes. Returns them by decreasing score
// (equal scores in input order).
std::vector<Detection> nms(const std::vector<Detection>& candidates, const NmsConfig& cfg = NmsConfig());

// COCO's evaluation (pycocotools COCOeval, bounding boxes, area "all", no crowd regions): per image and
// class the max_per_image_class best detections are matched greedily by decreasing score to the unmatched
// ground truth of highest IoU ≥ t, for t = 0.50, 0.55, ..., 0.95; per class and t, precision over all
// images is made non-increasing in recall and read at the 101 recalls 0, 0.01, ..., 1; AP is their mean.
// mAP averages AP over the classes that have ground truth (the others are -1 and left out).
struct MapResult {
  double map50 = 0;     // mAP at IoU 0.5
  double map50_95 = 0;  // mAP averaged over IoU 0.50:0.05:0.95
  std::vector<double> ap50, ap50_95;  // per class; -1 for a class without ground truth
  int classes_scored = 0;             // classes with ground truth
  int64_t images = 0, truths = 0, detections = 0;
};

class MapAccumulator {  // add images one at a time (e.g. a validation epoch), then compute()
 public:
  static constexpr int kIouThresholds = 10;
  static constexpr int kRecallPoints = 101;
  explicit MapAccumulator(int num_classes, int max_per_image_class = 100);
  // One image's detections (e.g. nms()'s output) and ground truths. Classes outside [0, num_classes) throw.
  void add_image(const std::vector<Detection>& detections, const std::vector<GroundTruth>& truths);
  MapResult compute() const;
  static double iou_threshold(int t);  // 0.50 + t·0.05 as numpy's linspace computes it

 private:
  struct Scored {  // one detection after matching
    float score;
    uint16_t true_positive;  // bit t: matched at iou_threshold(t)
  };
  int num_classes_, max_per_image_class_;
  std::vector<std::vector<Scored>> scored_;  // per class, images in order, each by decreasing score
  std::vector<int64_t> truths_;              // per class
  int64_t images_ = 0;
};

}  // namespace hetrain::detect
