// Decoding YOLOv5 head outputs into candidates (docs/detection.md, "Decoding"). In float, the precision in
// which YOLOv5's Detect and non_max_suppression run.
#include "detect/yolo_decode.hpp"

#include <cmath>

#include "hetrain/error.hpp"

namespace hetrain::detect {

namespace {

float sigmoidf(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The candidates of one level's rows of an image, appended to `out`.
void decode_level(const DetectHeadSpec& spec, int l, const float* level_rows, float conf, std::vector<Detection>& out) {
  const int no = spec.outputs(), gh = spec.grid_h(l), gw = spec.grid_w(l);
  const float stride = float(spec.strides[size_t(l)]);
  const float* row = level_rows;
  for (int a = 0; a < spec.anchors_per_level; ++a) {
    for (int y = 0; y < gh; ++y) {
      for (int x = 0; x < gw; ++x, row += no) {
        // non_max_suppression drops rows by objectness alone first; σ(cls) ≤ 1 makes it a shortcut here.
        const float obj = sigmoidf(row[4]);
        if (!(obj > conf)) continue;
        // Detect: grid holds (x, y) − 0.5, anchor_grid the anchors in pixels.
        const float cx = (sigmoidf(row[0]) * 2 + (float(x) - 0.5f)) * stride;
        const float cy = (sigmoidf(row[1]) * 2 + (float(y) - 0.5f)) * stride;
        const float sw = sigmoidf(row[2]) * 2, sh = sigmoidf(row[3]) * 2;
        const float w = sw * sw * spec.anchor_w(l, a), h = sh * sh * spec.anchor_h(l, a);
        const Box box{cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2};  // xywh2xyxy
        for (int c = 0; c < spec.num_classes; ++c) {
          const float score = sigmoidf(row[5 + c]) * obj;
          if (score > conf) out.push_back({box, score, c});
        }
      }
    }
  }
}

}  // namespace

std::vector<Detection> decode_image(const DetectHeadSpec& spec, const float* pred_image, float conf_threshold) {
  spec.validate();
  HT_CHECK(conf_threshold >= 0 && conf_threshold <= 1, "YOLO decode: confidence threshold must be in [0, 1], got ",
           conf_threshold);
  HT_CHECK(pred_image != nullptr, "YOLO decode: pred is null");
  std::vector<Detection> out;
  for (int l = 0; l < spec.levels(); ++l)
    decode_level(spec, l, pred_image + spec.level_offset(l) * spec.outputs(), conf_threshold, out);
  return out;
}

std::vector<std::vector<Detection>> decode(const DetectHeadSpec& spec, const float* pred, int64_t N,
                                           float conf_threshold) {
  HT_CHECK(N >= 0, "YOLO decode: the number of images must be non-negative, got ", N);
  std::vector<std::vector<Detection>> out(static_cast<size_t>(N));
  const int64_t image_floats = spec.rows_per_image() * spec.outputs();
  for (int64_t i = 0; i < N; ++i) out[size_t(i)] = decode_image(spec, pred + i * image_floats, conf_threshold);
  return out;
}

std::vector<GroundTruth> ground_truths(const DetectHeadSpec& spec, const data::BoxList& boxes, int64_t image) {
  spec.validate();
  HT_CHECK(image >= 0 && image < boxes.samples(), "YOLO ground truths: image ", image, " outside the ",
           boxes.samples(), " samples of the box list");
  std::vector<GroundTruth> out;
  const float W = float(spec.image_w), H = float(spec.image_h);
  for (int64_t r = boxes.offsets[size_t(image)]; r < boxes.offsets[size_t(image) + 1]; ++r) {
    const float* b = boxes.box(r);
    HT_CHECK(b[0] >= 0 && b[0] < spec.num_classes && b[0] == std::floor(b[0]), "YOLO ground truths: image ", image,
             " box ", r, ": class ", b[0], " is not an integer in [0, ", spec.num_classes, ")");
    out.push_back({box_from_cxcywh(b[1] * W, b[2] * H, b[3] * W, b[4] * H), int(b[0])});
  }
  return out;
}

}  // namespace hetrain::detect
