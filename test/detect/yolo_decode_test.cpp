// Decoding YOLOv5 head outputs (docs/detection.md, "Decoding") against hand-computed boxes and scores.
#include <gtest/gtest.h>

#include <cmath>

#include "detect/yolo_decode.hpp"
#include "detect_test_util.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::detect;

using hetrain::detect::test::small_head;

namespace {

float logit(double p) { return float(std::log(p / (1 - p))); }

// Every logit −20 (σ ≈ 2e-9: no candidates) except what a test sets.
std::vector<float> quiet_pred(const DetectHeadSpec& s, int64_t N) {
  return std::vector<float>(size_t(N * s.rows_per_image() * s.outputs()), -20.0f);
}

}  // namespace

TEST(YoloDecode, HandBuiltRow) {
  const DetectHeadSpec s = small_head();
  std::vector<float> pred = quiet_pred(s, 1);
  // Level 1 (stride 16), anchor 1 (64 × 48 px), cell x = 3, y = 2.
  float* row = pred.data() + s.row(1, 1, 2, 3) * s.outputs();
  row[0] = 0.0f;           // σ = 0.5: x = (2·0.5 − 0.5 + 3)·16 = 56
  row[1] = logit(0.75);    // y = (2·0.75 − 0.5 + 2)·16 = 48
  row[2] = 0.0f;           // w = (2·0.5)²·64 = 64
  row[3] = logit(0.25);    // h = (2·0.25)²·48 = 12
  row[4] = logit(0.8);     // objectness
  row[5] = 0.0f;           // class 0: 0.8·0.5 = 0.4
  row[6] = logit(0.2);     // class 1: 0.8·0.2 = 0.16
  const auto c = decode_image(s, pred.data());
  ASSERT_EQ(c.size(), 2u);  // class 2 scores 0.8·2e-9, below 0.001
  for (const auto& d : c) {
    EXPECT_NEAR(d.box.x0, 56 - 32, 1e-4);
    EXPECT_NEAR(d.box.x1, 56 + 32, 1e-4);
    EXPECT_NEAR(d.box.y0, 48 - 6, 1e-4);
    EXPECT_NEAR(d.box.y1, 48 + 6, 1e-4);
  }
  EXPECT_EQ(c[0].cls, 0);
  EXPECT_NEAR(c[0].score, 0.4f, 1e-6);
  EXPECT_EQ(c[1].cls, 1);
  EXPECT_NEAR(c[1].score, 0.16f, 1e-6);
  // A higher threshold keeps class 0 only; one above the objectness drops the row.
  EXPECT_EQ(decode_image(s, pred.data(), 0.2f).size(), 1u);
  EXPECT_TRUE(decode_image(s, pred.data(), 0.85f).empty());
}

TEST(YoloDecode, LevelZeroOffsetsAndImagesApart) {
  const DetectHeadSpec s = small_head();
  std::vector<float> pred = quiet_pred(s, 2);
  // Image 1, level 0 (stride 8), anchor 0 (8 × 8), cell (0, 7): σ(t) = 0 at the extreme gives the
  // centre half a cell before the cell, (−0.5 + x)·8; size (2σ)²·8 with σ = 1 gives 32.
  float* row = pred.data() + (s.rows_per_image() + s.row(0, 0, 7, 0)) * s.outputs();
  row[0] = -40.0f;  // σ ≈ 0
  row[1] = -40.0f;
  row[2] = 40.0f;   // σ ≈ 1
  row[3] = 40.0f;
  row[4] = 40.0f;
  row[7] = 40.0f;   // class 2
  const auto out = decode(s, pred.data(), 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].empty());
  ASSERT_EQ(out[1].size(), 1u);
  const Detection& d = out[1][0];
  EXPECT_EQ(d.cls, 2);
  EXPECT_NEAR(d.score, 1.0f, 1e-6);
  EXPECT_NEAR(d.box.x0, -4 - 16, 1e-4);
  EXPECT_NEAR(d.box.x1, -4 + 16, 1e-4);
  EXPECT_NEAR(d.box.y0, 6.5 * 8 - 16, 1e-4);
  EXPECT_NEAR(d.box.y1, 6.5 * 8 + 16, 1e-4);
}

TEST(YoloDecode, CandidatesGoThroughNms) {
  // The same object seen from two neighbouring cells (as training assigns it): NMS keeps the better one.
  const DetectHeadSpec s = small_head();
  std::vector<float> pred = quiet_pred(s, 1);
  for (int x : {2, 3}) {
    float* row = pred.data() + s.row(0, 1, 4, x) * s.outputs();
    row[0] = x == 2 ? logit(0.75) : logit(0.25);  // centre x = 3·8 = 24 from both cells
    row[1] = row[2] = row[3] = 0.0f;
    row[4] = logit(x == 2 ? 0.9 : 0.7);
    row[5] = 0.0f;
  }
  const auto kept = nms(decode_image(s, pred.data()));
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_NEAR(kept[0].score, 0.45f, 1e-6);
  EXPECT_NEAR(kept[0].box.x0, 24 - 8, 1e-4);  // anchor 1 is 16 px wide
}

TEST(YoloDecode, GroundTruthsInPixels) {
  const DetectHeadSpec s = small_head();
  data::BoxList b;
  b.rows = {1, 0.5f, 0.25f, 0.5f, 0.125f, 2, 0.1f, 0.1f, 0.2f, 0.2f};
  b.offsets = {0, 0, 2};
  EXPECT_TRUE(ground_truths(s, b, 0).empty());
  const auto g = ground_truths(s, b, 1);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].cls, 1);
  EXPECT_FLOAT_EQ(g[0].box.x0, 16.0f);
  EXPECT_FLOAT_EQ(g[0].box.x1, 48.0f);
  EXPECT_FLOAT_EQ(g[0].box.y0, 12.0f);
  EXPECT_FLOAT_EQ(g[0].box.y1, 20.0f);
  EXPECT_EQ(g[1].cls, 2);
  EXPECT_THROW(ground_truths(s, b, 2), Error);
}

TEST(YoloDecode, BadInputsNameTheProblem) {
  const DetectHeadSpec s = small_head();
  std::vector<float> pred = quiet_pred(s, 1);
  EXPECT_THROW(decode_image(s, pred.data(), 1.5f), Error);
  DetectHeadSpec bad = s;
  bad.strides = {8, 24};  // 64 is not a multiple of 24
  try {
    decode_image(bad, pred.data());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("not a multiple of level 1's stride 24"), std::string::npos) << e.message();
  }
  EXPECT_TRUE(decode(s, nullptr, 0).empty());
}
