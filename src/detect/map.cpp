// COCO-style mean average precision (docs/detection.md, "Evaluation"): matching per image and class at ten
// IoU thresholds (add_image), then precision/recall over all images, 101-point interpolation (compute).
#include <algorithm>
#include <numeric>

#include "hetrain/detect.hpp"
#include "hetrain/error.hpp"

namespace hetrain::detect {

MapAccumulator::MapAccumulator(int num_classes, int max_per_image_class)
    : num_classes_(num_classes),
      max_per_image_class_(max_per_image_class),
      scored_(size_t(std::max(num_classes, 0))),
      truths_(size_t(std::max(num_classes, 0)), 0) {
  HT_CHECK(num_classes > 0, "mAP: the number of classes must be positive, got ", num_classes);
  HT_CHECK(max_per_image_class > 0, "mAP: detections per image and class must be positive, got ",
           max_per_image_class);
}

double MapAccumulator::iou_threshold(int t) {
  // numpy.linspace(.5, .95, 10) as COCOeval builds it: start + t·step, the last one exactly the end, so a
  // box at an IoU of exactly a threshold matches as it does in pycocotools.
  return t == kIouThresholds - 1 ? 0.95 : double(t) * ((0.95 - 0.5) / (kIouThresholds - 1)) + 0.5;
}

void MapAccumulator::add_image(const std::vector<Detection>& detections, const std::vector<GroundTruth>& truths) {
  for (const auto& d : detections)
    HT_CHECK(d.cls >= 0 && d.cls < num_classes_, "mAP: detection class ", d.cls, " outside [0, ", num_classes_, ")");
  for (const auto& g : truths)
    HT_CHECK(g.cls >= 0 && g.cls < num_classes_, "mAP: ground-truth class ", g.cls, " outside [0, ", num_classes_,
             ")");
  ++images_;
  for (int c = 0; c < num_classes_; ++c) {
    std::vector<const GroundTruth*> gt;
    for (const auto& g : truths)
      if (g.cls == c) gt.push_back(&g);
    std::vector<const Detection*> dt;
    for (const auto& d : detections)
      if (d.cls == c) dt.push_back(&d);
    truths_[c] += int64_t(gt.size());
    if (dt.empty()) continue;
    std::stable_sort(dt.begin(), dt.end(), [](const Detection* a, const Detection* b) { return a->score > b->score; });
    if (int(dt.size()) > max_per_image_class_) dt.resize(size_t(max_per_image_class_));
    std::vector<double> ious(dt.size() * gt.size());
    for (size_t d = 0; d < dt.size(); ++d)
      for (size_t g = 0; g < gt.size(); ++g) ious[d * gt.size() + g] = iou(dt[d]->box, gt[g]->box);
    std::vector<uint16_t> tp(dt.size(), 0);
    for (int t = 0; t < kIouThresholds; ++t) {
      std::vector<char> taken(gt.size(), 0);
      for (size_t d = 0; d < dt.size(); ++d) {
        // The unmatched ground truth of highest IoU, at least the threshold; on a tie the later one, as
        // COCOeval's `if iou < best: continue` keeps replacing on equality.
        double best = std::min(iou_threshold(t), 1 - 1e-10);
        int match = -1;
        for (size_t g = 0; g < gt.size(); ++g) {
          if (taken[g] || ious[d * gt.size() + g] < best) continue;
          best = ious[d * gt.size() + g];
          match = int(g);
        }
        if (match < 0) continue;
        taken[size_t(match)] = 1;
        tp[d] |= uint16_t(1u << t);
      }
    }
    for (size_t d = 0; d < dt.size(); ++d) scored_[c].push_back({dt[d]->score, tp[d]});
  }
}

namespace {
// Average precision of one class at one threshold: scored detections of all images (images in order, each
// by decreasing score), `truths` > 0 ground truths.
double average_precision(const std::vector<uint16_t>& tp_bits, const std::vector<size_t>& order, int t,
                         int64_t truths) {
  const size_t n = order.size();
  std::vector<double> recall(n), precision(n);
  int64_t tp = 0, fp = 0;
  for (size_t k = 0; k < n; ++k) {
    if (tp_bits[order[k]] & (1u << t)) ++tp;
    else ++fp;
    recall[k] = double(tp) / double(truths);
    // COCOeval adds 2^-52 to the denominator against 0/0; tp + fp ≥ 1 here, so it is left out (it moves
    // AP by less than 1e-15, and perfect detections score exactly 1).
    precision[k] = double(tp) / double(tp + fp);
  }
  for (size_t k = n; k-- > 1;) precision[k - 1] = std::max(precision[k - 1], precision[k]);
  double sum = 0;
  for (int r = 0; r < MapAccumulator::kRecallPoints; ++r) {
    // numpy.linspace(0, 1, 101) as COCOeval builds it; searchsorted(side='left'): the first recall ≥ it.
    const double at = r == MapAccumulator::kRecallPoints - 1 ? 1.0 : double(r) * 0.01;
    const size_t k = size_t(std::lower_bound(recall.begin(), recall.end(), at) - recall.begin());
    if (k < n) sum += precision[k];
  }
  return sum / MapAccumulator::kRecallPoints;
}
}  // namespace

MapResult MapAccumulator::compute() const {
  MapResult r;
  r.images = images_;
  r.ap50.assign(size_t(num_classes_), -1);
  r.ap50_95.assign(size_t(num_classes_), -1);
  for (int c = 0; c < num_classes_; ++c) {
    r.truths += truths_[c];
    r.detections += int64_t(scored_[c].size());
    if (truths_[c] == 0) continue;
    // All images' detections by decreasing score; equal scores keep image order (COCOeval's mergesort).
    const auto& s = scored_[c];
    std::vector<size_t> order(s.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a].score > s[b].score; });
    std::vector<uint16_t> bits(s.size());
    for (size_t k = 0; k < s.size(); ++k) bits[k] = s[k].true_positive;
    double sum = 0;
    for (int t = 0; t < kIouThresholds; ++t) {
      const double ap = average_precision(bits, order, t, truths_[c]);
      if (t == 0) r.ap50[c] = ap;
      sum += ap;
    }
    r.ap50_95[c] = sum / kIouThresholds;
    r.map50 += r.ap50[c];
    r.map50_95 += r.ap50_95[c];
    ++r.classes_scored;
  }
  if (r.classes_scored > 0) {
    r.map50 /= r.classes_scored;
    r.map50_95 /= r.classes_scored;
  }
  return r;
}

}  // namespace hetrain::detect
