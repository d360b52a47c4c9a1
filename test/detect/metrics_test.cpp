// NMS and COCO-style mAP against hand-computed cases (docs/detection.md, "Evaluation").
#include <gtest/gtest.h>

#include "hetrain/detect.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::detect;

namespace {
Detection det(float x0, float y0, float x1, float y1, float score, int cls = 0) {
  return {{x0, y0, x1, y1}, score, cls};
}
GroundTruth gt(float x0, float y0, float x1, float y1, int cls = 0) { return {{x0, y0, x1, y1}, cls}; }
}  // namespace

TEST(Iou, HandComputed) {
  EXPECT_DOUBLE_EQ(iou({0, 0, 2, 1}, {0, 0, 1, 1}), 0.5);
  EXPECT_DOUBLE_EQ(iou({0, 0, 2, 2}, {1, 1, 3, 3}), 1.0 / 7);
  EXPECT_DOUBLE_EQ(iou({0, 0, 1, 1}, {2, 2, 3, 3}), 0.0);
  EXPECT_DOUBLE_EQ(iou({0, 0, 0, 0}, {0, 0, 0, 0}), 0.0);
  const Box b = box_from_cxcywh(0.5f, 0.25f, 0.5f, 0.5f);
  EXPECT_FLOAT_EQ(b.x0, 0.25f);
  EXPECT_FLOAT_EQ(b.y1, 0.5f);
}

TEST(Nms, SuppressesDuplicatesPerClassOnly) {
  // Two overlapping boxes of class 0 (IoU 0.8 > 0.6): the lower one goes; the same box in class 1 stays.
  const std::vector<Detection> in = {det(0, 0, 10, 10, 0.7f), det(0, 0, 10, 8, 0.9f), det(0, 0, 10, 10, 0.5f, 1),
                                     det(20, 20, 30, 30, 0.6f)};
  const auto out = nms(in);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FLOAT_EQ(out[0].score, 0.9f);
  EXPECT_FLOAT_EQ(out[1].score, 0.6f);
  EXPECT_EQ(out[2].cls, 1);
}

TEST(Nms, ThresholdsAreStrict) {
  // IoU exactly 0.6 is kept (suppressed only above it); a score exactly at the confidence threshold is dropped.
  NmsConfig cfg;
  cfg.conf_threshold = 0.25f;
  const std::vector<Detection> in = {det(0, 0, 10, 1, 0.9f), det(0, 0, 6, 1, 0.8f), det(0, 0, 5, 1, 0.25f),
                                     det(50, 0, 51, 1, 0.3f)};
  const auto out = nms(in, cfg);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FLOAT_EQ(out[1].score, 0.8f);
  EXPECT_FLOAT_EQ(out[2].score, 0.3f);
}

TEST(Nms, KeepsTheBestMaxDetections) {
  std::vector<Detection> in;
  for (int i = 0; i < 500; ++i) in.push_back(det(float(2 * i), 0, float(2 * i + 1), 1, float(i) / 1000, i % 3));
  const auto out = nms(in);
  ASSERT_EQ(out.size(), 300u);
  EXPECT_FLOAT_EQ(out.front().score, 0.499f);
  EXPECT_FLOAT_EQ(out.back().score, 0.2f);
  // Confidence 0.001: the candidate of score 0.001 (i = 1) and 0 (i = 0) would be dropped anyway.
  NmsConfig all;
  all.max_detections = 1000;
  EXPECT_EQ(nms(in, all).size(), 498u);
}

TEST(Map, PerfectDetectionsScoreOne) {
  MapAccumulator acc(2);
  acc.add_image({det(0, 0, 10, 10, 0.9f), det(20, 20, 30, 40, 0.8f, 1)}, {gt(0, 0, 10, 10), gt(20, 20, 30, 40, 1)});
  acc.add_image({det(5, 5, 6, 6, 0.3f)}, {gt(5, 5, 6, 6)});
  const MapResult r = acc.compute();
  EXPECT_EQ(r.map50, 1.0);
  EXPECT_EQ(r.map50_95, 1.0);
  EXPECT_EQ(r.classes_scored, 2);
  EXPECT_EQ(r.truths, 3);
  EXPECT_EQ(r.detections, 3);
}

TEST(Map, FalsePositiveAtHigherScore) {
  // Ranked: FP (0.9), TP (0.8). Precision at recall 1 is 1/2, and the envelope makes every recall point
  // 0..1 read 0.5: AP = 0.5 at every threshold.
  MapAccumulator acc(1);
  acc.add_image({det(50, 50, 60, 60, 0.9f), det(0, 0, 10, 10, 0.8f)}, {gt(0, 0, 10, 10)});
  const MapResult r = acc.compute();
  EXPECT_DOUBLE_EQ(r.map50, 0.5);
  EXPECT_DOUBLE_EQ(r.map50_95, 0.5);
  // The same false positive ranked below the hit costs nothing.
  MapAccumulator low(1);
  low.add_image({det(50, 50, 60, 60, 0.7f), det(0, 0, 10, 10, 0.8f)}, {gt(0, 0, 10, 10)});
  EXPECT_DOUBLE_EQ(low.compute().map50, 1.0);
}

TEST(Map, MissedObject) {
  // Two objects, one found: recall reaches 0.5 at precision 1; recall points 0..0.50 (51 of 101) read 1.
  MapAccumulator acc(1);
  acc.add_image({det(0, 0, 10, 10, 0.9f)}, {gt(0, 0, 10, 10)});
  acc.add_image({}, {gt(0, 0, 10, 10)});
  const MapResult r = acc.compute();
  EXPECT_DOUBLE_EQ(r.map50, 51.0 / 101);
  EXPECT_DOUBLE_EQ(r.map50_95, 51.0 / 101);
}

TEST(Map, TwoClassesAveragedAndClassesWithoutTruthLeftOut) {
  // Class 0 perfect (AP 1); class 1: its only object missed, one wrong box (AP 0); class 2 has detections
  // but no ground truth: -1, not averaged.
  MapAccumulator acc(3);
  acc.add_image({det(0, 0, 10, 10, 0.9f), det(40, 40, 50, 50, 0.8f, 1), det(0, 0, 5, 5, 0.5f, 2)},
                {gt(0, 0, 10, 10), gt(20, 20, 30, 30, 1)});
  const MapResult r = acc.compute();
  EXPECT_DOUBLE_EQ(r.ap50[0], 1.0);
  EXPECT_DOUBLE_EQ(r.ap50[1], 0.0);
  EXPECT_EQ(r.ap50[2], -1.0);
  EXPECT_EQ(r.classes_scored, 2);
  EXPECT_DOUBLE_EQ(r.map50, 0.5);
  // A detection of the right box but the wrong class is no hit.
  MapAccumulator wrong(2);
  wrong.add_image({det(0, 0, 10, 10, 0.9f, 1)}, {gt(0, 0, 10, 10, 0)});
  EXPECT_DOUBLE_EQ(wrong.compute().map50, 0.0);
}

TEST(Map, DuplicatesCountAsFalsePositivesUnlessNmsRemovesThem) {
  // Two boxes on one object: the higher-scored one matches it, the other is a false positive. Ranked
  // between the two hits, the duplicate gives precision 1, 1/2, 2/3 at recalls 0.5, 0.5, 1.
  const std::vector<GroundTruth> truth = {gt(0, 0, 10, 10), gt(100, 100, 110, 110)};
  const std::vector<Detection> raw = {det(0, 0, 10, 10, 0.9f), det(0, 0, 10, 9, 0.8f), det(100, 100, 110, 110, 0.7f)};
  MapAccumulator with_dup(1);
  with_dup.add_image(raw, truth);
  // Recall points 0..0.5 read max(1, ...) = 1; 0.51..1 read 2/3.
  EXPECT_NEAR(with_dup.compute().map50, (51 * 1.0 + 50 * (2.0 / 3)) / 101, 1e-12);  // summed in another order
  MapAccumulator after_nms(1);
  after_nms.add_image(nms(raw), truth);  // IoU 0.9 > 0.6: the duplicate is suppressed
  EXPECT_DOUBLE_EQ(after_nms.compute().map50, 1.0);
}

TEST(Map, IouExactlyAtThresholdsMatches) {
  // IoU exactly 0.5 (box half the ground truth): a hit at 0.50 only. AP@0.5 = 1, AP@0.5:0.95 = 1/10.
  MapAccumulator half(1);
  half.add_image({det(0, 0, 1, 1, 0.9f)}, {gt(0, 0, 2, 1)});
  EXPECT_DOUBLE_EQ(half.compute().map50, 1.0);
  EXPECT_DOUBLE_EQ(half.compute().map50_95, 0.1);
  // IoU exactly 0.75: hits at 0.50 ... 0.75, six thresholds.
  MapAccumulator three_quarters(1);
  three_quarters.add_image({det(0, 0, 3, 1, 0.9f)}, {gt(0, 0, 4, 1)});
  EXPECT_DOUBLE_EQ(three_quarters.compute().map50_95, 0.6);
  // Just below 0.5: no hit anywhere.
  MapAccumulator below(1);
  below.add_image({det(0, 0, 0.999f, 1, 0.9f)}, {gt(0, 0, 2, 1)});
  EXPECT_DOUBLE_EQ(below.compute().map50, 0.0);
  for (int t = 0; t < MapAccumulator::kIouThresholds; ++t)
    EXPECT_NEAR(MapAccumulator::iou_threshold(t), 0.5 + 0.05 * t, 1e-12);
}

TEST(Map, GreedyMatchingByScore) {
  // Two detections over two objects, the better-scored one overlapping both: it takes the object of highest
  // IoU (the first); the other detection then still finds the second.
  MapAccumulator acc(1);
  acc.add_image({det(0, 0, 10, 10, 0.9f), det(8, 0, 18, 10, 0.8f)}, {gt(0, 0, 10, 10), gt(8, 0, 18, 10)});
  EXPECT_DOUBLE_EQ(acc.compute().map50, 1.0);
}

TEST(Map, BadClassesAreRefused) {
  MapAccumulator acc(2);
  EXPECT_THROW(acc.add_image({det(0, 0, 1, 1, 0.5f, 2)}, {}), hetrain::Error);
  EXPECT_THROW(acc.add_image({}, {gt(0, 0, 1, 1, -1)}), hetrain::Error);
  EXPECT_THROW(MapAccumulator(0), hetrain::Error);
}
