// detect/yolo_decode.hpp — YOLOv5's Detect head outputs to scored boxes for evaluation (docs/detection.md,
// "Decoding"): the inference branch of YOLOv5's Detect, then the candidate step of its
// non_max_suppression with multi_label (its validation setting). The candidates go to
// detect::nms (hetrain/detect.hpp), then to MapAccumulator with ground_truths().
#pragma once

#include <cstdint>
#include <vector>

#include "detect/yolo_loss.hpp"
#include "hetrain/data.hpp"
#include "hetrain/detect.hpp"

namespace hetrain::detect {

// Candidates of one image, pred_image [A, no] in YoloLoss's layout. A row whose σ(obj) is above
// conf_threshold gives one candidate per class c with score σ(obj)·σ(cls_c) above it, box in pixels of the
// network input as corners of centre (2σ(tx) − 0.5 + x)·stride, (2σ(ty) − 0.5 + y)·stride and size
// (2σ(tw))²·anchor_w, (2σ(th))²·anchor_h. Rows in layout order, classes ascending within a row.
std::vector<Detection> decode_image(const DetectHeadSpec& spec, const float* pred_image, float conf_threshold = 0.001f);
// decode_image of each image of pred [N, A, no].
std::vector<std::vector<Detection>> decode(const DetectHeadSpec& spec, const float* pred, int64_t N,
                                           float conf_threshold = 0.001f);
// The boxes of sample `image` (normalised cx, cy, w, h) as ground truths in pixels of the network input,
// the unit decode() uses.
std::vector<GroundTruth> ground_truths(const DetectHeadSpec& spec, const data::BoxList& boxes, int64_t image);

}  // namespace hetrain::detect
