// Boxes and per-class non-maximum suppression (docs/detection.md, "Evaluation").
#include <algorithm>
#include <numeric>

#include "hetrain/detect.hpp"
#include "hetrain/error.hpp"

namespace hetrain::detect {

Box box_from_cxcywh(float cx, float cy, float w, float h) { return {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2}; }

double iou(const Box& a, const Box& b) {
  const double iw = std::max(0.0, double(std::min(a.x1, b.x1)) - double(std::max(a.x0, b.x0)));
  const double ih = std::max(0.0, double(std::min(a.y1, b.y1)) - double(std::max(a.y0, b.y0)));
  const double inter = iw * ih;
  const double area_a = (double(a.x1) - a.x0) * (double(a.y1) - a.y0);
  const double area_b = (double(b.x1) - b.x0) * (double(b.y1) - b.y0);
  const double uni = area_a + area_b - inter;
  return uni > 0 ? inter / uni : 0.0;
}

std::vector<Detection> nms(const std::vector<Detection>& candidates, const NmsConfig& cfg) {
  HT_CHECK(cfg.max_detections >= 0, "nms: max_detections must be non-negative, got ", cfg.max_detections);
  // Candidates above the confidence threshold, by decreasing score (stable: equal scores keep input order).
  std::vector<size_t> order;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].score > cfg.conf_threshold) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return candidates[a].score > candidates[b].score; });
  // Walking all classes together in score order is per-class NMS: a box is only compared with the kept
  // boxes of its own class, which all score at least as high. The walk stops once max_detections are kept,
  // since every later box scores lower.
  std::vector<Detection> kept;
  for (size_t i : order) {
    if (int(kept.size()) == cfg.max_detections) break;
    const Detection& d = candidates[i];
    const bool suppressed = std::any_of(kept.begin(), kept.end(), [&](const Detection& k) {
      return k.cls == d.cls && iou(k.box, d.box) > double(cfg.iou_threshold);
    });
    if (!suppressed) kept.push_back(d);
  }
  return kept;
}

}  // namespace hetrain::detect
