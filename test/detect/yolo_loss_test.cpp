// YOLOv5's loss and target assignment (docs/detection.md, "Loss and targets"): hand-computed cases for the
// head, CIoU, matching and the loss terms, and a finite-difference check of the analytic gradient.
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "detect/yolo_loss.hpp"
#include "detect_test_util.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::detect;

using hetrain::detect::test::small_head;

namespace {

data::BoxList boxes(const std::vector<std::vector<std::array<float, 5>>>& per_image) {
  data::BoxList b;
  b.offsets.push_back(0);
  for (const auto& img : per_image) {
    for (const auto& r : img) b.rows.insert(b.rows.end(), r.begin(), r.end());
    b.offsets.push_back(b.offsets.back() + int64_t(img.size()));
  }
  return b;
}

struct Cell {
  int anchor, x, y;
  bool operator==(const Cell& o) const { return anchor == o.anchor && x == o.x && y == o.y; }
};
std::vector<Cell> cells(const std::vector<TargetMatch>& ms) {
  std::vector<Cell> out;
  for (const auto& m : ms) out.push_back({m.anchor, m.gx, m.gy});
  return out;
}

}  // namespace

TEST(YoloHead, RowsAndOffsets) {
  const DetectHeadSpec s = small_head();
  EXPECT_EQ(s.grid_w(0), 8);
  EXPECT_EQ(s.grid_h(1), 4);
  EXPECT_EQ(s.outputs(), 8);
  EXPECT_EQ(s.rows_per_image(), 2 * 64 + 2 * 16);
  EXPECT_EQ(s.level_offset(0), 0);
  EXPECT_EQ(s.level_offset(1), 128);
  EXPECT_EQ(s.row(1, 1, 2, 3), 128 + 16 + 2 * 4 + 3);  // level, then anchor, then y, then x
  const DetectHeadSpec v5 = yolov5_head(80, 640, 640);
  EXPECT_EQ(v5.rows_per_image(), 3 * (80 * 80 + 40 * 40 + 20 * 20));
  EXPECT_FLOAT_EQ(v5.anchor_w(2, 2), 373.0f);
  EXPECT_FLOAT_EQ(v5.anchor_h(1, 0), 61.0f);
}

TEST(YoloHead, BadSpecsNameTheProblem) {
  DetectHeadSpec s = small_head();
  s.anchors.pop_back();
  try {
    s.validate();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("anchors must hold levels·anchors_per_level·2 = 8 values"), std::string::npos)
        << e.message();
  }
  s = small_head();
  s.image_w = 72;  // not a multiple of 16
  EXPECT_THROW(s.validate(), Error);
  s = small_head();
  s.num_classes = 0;
  EXPECT_THROW(s.validate(), Error);
  YoloLossConfig cfg;
  cfg.balance = {4.0f, 1.0f, 0.4f};  // three weights for two levels
  EXPECT_THROW(YoloLoss(small_head(), cfg), Error);
}

TEST(YoloConfig, ScaledLikeTrainPy) {
  // 10 classes at 320 px on YOLOv5's 3 levels: cls · 10/80, obj · (320/640)².
  const YoloLossConfig c = scaled_for(yolov5_head(10, 320, 320));
  EXPECT_FLOAT_EQ(c.box_gain, 0.05f);
  EXPECT_FLOAT_EQ(c.cls_gain, 0.0625f);
  EXPECT_FLOAT_EQ(c.obj_gain, 0.25f);
  EXPECT_FLOAT_EQ(c.anchor_t, 4.0f);
  // 2 levels: every gain · 3/2 as well.
  const YoloLossConfig d = scaled_for(small_head());  // 3 classes, 64 px
  EXPECT_FLOAT_EQ(d.box_gain, 0.075f);
  EXPECT_FLOAT_EQ(d.cls_gain, float(0.5 * 3 / 80.0 * 1.5));
  EXPECT_FLOAT_EQ(d.obj_gain, float(64.0 * 64 / (640 * 640) * 1.5));
  EXPECT_EQ(default_balance(3), (std::vector<float>{4.0f, 1.0f, 0.4f}));
  EXPECT_EQ(default_balance(2), (std::vector<float>{4.0f, 1.0f}));
}

TEST(YoloCiou, IdenticalBoxesScoreOne) {
  const double b[4] = {3.5, 2.25, 1.5, 4.0};
  const Ciou c = ciou(b, b);
  EXPECT_NEAR(c.ciou, 1.0, 1e-7);  // only bbox_iou's eps (1e-7 in the union) keeps it from 1 exactly
  EXPECT_NEAR(c.iou, 1.0, 1e-7);
  EXPECT_EQ(c.alpha, 0.0);
}

TEST(YoloCiou, HandComputedPairs) {
  // Same shape, shifted by (1, 1): corners [0,2]² and [1,3]². inter 1, union 7, enclosing box 3 × 3
  // (diagonal² 18), centre distance² 2, v = 0: CIoU = 1/7 − 2/18 = 2/63.
  const double p[4] = {1, 1, 2, 2}, t[4] = {2, 2, 2, 2};
  EXPECT_NEAR(ciou(p, t).ciou, 2.0 / 63.0, 1e-7);
  // A 2 × 1 and a 1 × 2 box on the same centre: inter 1, union 3, no centre distance;
  // v = 4/π²·(atan 2 − atan ½)² = 4/π²·atan(¾)², alpha = v / (v − 1/3 + 1).
  const double a[4] = {0, 0, 2, 1}, b[4] = {0, 0, 1, 2};
  const double v = 4 / (M_PI * M_PI) * std::pow(std::atan(0.75), 2), alpha = v / (v + 2.0 / 3.0);
  const Ciou c = ciou(a, b);
  EXPECT_NEAR(c.iou, 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(c.alpha, alpha, 1e-7);
  EXPECT_NEAR(c.ciou, 1.0 / 3.0 - v * alpha, 1e-7);
  // Disjoint: no intersection, the distance term alone (corners [0,1]² and [2,3]²: diag² 18, dist² 8).
  const double d1[4] = {0.5, 0.5, 1, 1}, d2[4] = {2.5, 2.5, 1, 1};
  EXPECT_NEAR(ciou(d1, d2).ciou, -8.0 / 18.0, 1e-7);
}

TEST(YoloCiou, BackwardMatchesFiniteDifferences) {
  // d ciou / d pred with alpha fixed, against central differences in double: a close box of another aspect
  // (alpha ≈ 0.13, so the aspect term counts), overlapping ones, a disjoint one (no intersection gradient), and
  // one whose left edge ties the target's (0.25): PyTorch gives half the gradient of min/max to each side
  // on a tie, which is what the central difference sees.
  const double t[4] = {1.3, 0.7, 2.1, 1.4};
  const double preds[][4] = {{1.25, 0.75, 1.2, 2.0}, {1.0, 1.0, 1.5, 2.0}, {2.5, 0.2, 0.6, 0.9},
                             {4.0, 3.0, 1.0, 1.0}, {1.2, 0.8, 2.5, 1.1}};
  for (const auto& p0 : preds) {
    const double alpha = ciou(p0, t).alpha;
    double g[4];
    ciou_backward(p0, t, alpha, 1.0, g);
    for (int i = 0; i < 4; ++i) {
      const double h = 1e-6;
      double pp[4], pm[4];
      std::memcpy(pp, p0, sizeof pp);
      std::memcpy(pm, p0, sizeof pm);
      pp[i] += h;
      pm[i] -= h;
      auto fixed = [&](const double* q) {  // ciou(q) with alpha(q) replaced by alpha
        const double v = 4 / (M_PI * M_PI) * std::pow(std::atan(t[2] / t[3]) - std::atan(q[2] / q[3]), 2);
        const Ciou c = ciou(q, t);
        return c.ciou + v * (c.alpha - alpha);
      };
      const double fd = (fixed(pp) - fixed(pm)) / (2 * h);
      EXPECT_NEAR(g[i], fd, 1e-6 + 1e-6 * std::abs(fd)) << "component " << i;
    }
  }
}

TEST(YoloMatch, BoxNearACellCornerTakesTwoNeighbours) {
  const DetectHeadSpec s = small_head();
  // Level 0: centre (2.3, 5.2) in grid units, size (1.25, 1.5): both anchors within 4×. The centre is in
  // the left and upper halves of cell (2, 5), more than a cell from those borders: cells (2, 5), (1, 5),
  // (2, 4). Level 1: centre (1.15, 2.6), size (0.625, 0.75): anchor 0 only (anchor 1 is 6.4× wider);
  // left half and lower half: cells (1, 2), (0, 2), (1, 3).
  const auto m = build_targets(s, 4.0f, boxes({{{1, 2.3f / 8, 5.2f / 8, 10.0f / 64, 12.0f / 64}}}), 1);
  ASSERT_EQ(m.size(), 2u);
  // YOLOv5's order: offset (centre, left, up, right, down), then anchor.
  const std::vector<Cell> want0 = {{0, 2, 5}, {1, 2, 5}, {0, 1, 5}, {1, 1, 5}, {0, 2, 4}, {1, 2, 4}};
  EXPECT_EQ(cells(m[0]), want0);
  const std::vector<Cell> want1 = {{0, 1, 2}, {0, 0, 2}, {0, 1, 3}};
  EXPECT_EQ(cells(m[1]), want1);
  // The box is measured from each cell: 0.3 from the centre cell, 1.3 from the left one, 1.2 from the upper.
  EXPECT_NEAR(m[0][0].tx, 0.3f, 1e-5);
  EXPECT_NEAR(m[0][2].tx, 1.3f, 1e-5);
  EXPECT_NEAR(m[0][4].ty, 1.2f, 1e-5);
  EXPECT_NEAR(m[0][0].tw, 1.25f, 1e-6);
  EXPECT_NEAR(m[1][2].ty, -0.4f, 1e-5);  // the lower neighbour lies below the centre
  for (const auto& lv : m)
    for (const auto& t : lv) EXPECT_EQ(t.cls, 1);
}

TEST(YoloMatch, RatioLimitIsStrictAndTinyBoxesMatchNothing) {
  const DetectHeadSpec s = small_head();
  // 32 × 32 px is 4 × 4 cells of level 0: exactly 4× anchor 0 (no match: the test is max(r, 1/r) < 4),
  // 2 × 1.33 of anchor 1 (match); on level 1, 2 × 2 cells: anchor 0 exactly, anchor 1 within 2×.
  const auto m = build_targets(s, 4.0f, boxes({{{0, 0.5f, 0.5f, 0.5f, 0.5f}}}), 1);
  ASSERT_EQ(m[0].size(), 5u);
  for (const auto& t : m[0]) EXPECT_EQ(t.anchor, 1);
  // The centre (2, 2) of level 1 lies exactly on a cell corner: all four neighbour tests pass, and the
  // right and lower "neighbours" (2 + 0.5 truncated) are the centre's cell again, as in YOLOv5.
  const std::vector<Cell> want1 = {{0, 2, 2}, {1, 2, 2}, {0, 1, 2}, {1, 1, 2}, {0, 2, 1},
                                   {1, 2, 1}, {0, 2, 2}, {1, 2, 2}, {0, 2, 2}, {1, 2, 2}};
  EXPECT_EQ(cells(m[1]), want1);
  EXPECT_FLOAT_EQ(m[1][6].tx, 0.0f);
  EXPECT_FLOAT_EQ(m[1][2].tx, 1.0f);
  // A 1-pixel box is 8× smaller than every anchor on every level.
  const auto none = build_targets(s, 4.0f, boxes({{{2, 0.5f, 0.5f, 1.0f / 64, 1.0f / 64}}}), 1);
  EXPECT_TRUE(none[0].empty());
  EXPECT_TRUE(none[1].empty());
}

TEST(YoloMatch, CentreOnTheFarBorderIsClamped) {
  const DetectHeadSpec s = small_head();
  // cx = 1 is gx = 8 on level 0: YOLOv5 clamps cell 8 to 7 in place before measuring the box from it, so
  // tx = 8 − 7 = 1; the left neighbour (8 − 0.5 → 7) is the same cell and box. No right neighbour (0 cells
  // to the border).
  const auto m = build_targets(s, 4.0f, boxes({{{0, 1.0f, 0.3f, 8.0f / 64, 8.0f / 64}}}), 1);
  std::vector<TargetMatch> a0;
  for (const auto& t : m[0])
    if (t.anchor == 0) a0.push_back(t);
  ASSERT_EQ(a0.size(), 3u);  // centre, left, and (gy = 2.4) up
  EXPECT_EQ(a0[0].gx, 7);
  EXPECT_FLOAT_EQ(a0[0].tx, 1.0f);
  EXPECT_EQ(a0[1].gx, 7);
  EXPECT_FLOAT_EQ(a0[1].tx, 1.0f);
  EXPECT_EQ(a0[2].gy, 1);
  // A box on the near border (gx < 1) has no left neighbour.
  const auto n = build_targets(s, 4.0f, boxes({{{0, 0.3f / 8, 0.55f, 8.0f / 64, 8.0f / 64}}}), 1);
  for (const auto& t : n[0]) EXPECT_EQ(t.gx, 0);
}

TEST(YoloLoss, OneBoxByHand) {
  // 1 level, stride 8, 16 px: a 2 × 2 grid, one anchor of 8 px (1 cell), 2 classes. A box of class 0 with
  // centre (0.5, 0.5) cells and size 1 × 1 cells matches cell (0, 0) only. All logits 0 except the
  // matched row's objectness (2): the predicted box is (0.5, 0.5, 1, 1), the target itself.
  DetectHeadSpec s;
  s.num_classes = 2;
  s.anchors_per_level = 1;
  s.strides = {8};
  s.anchors = {8, 8};
  s.image_h = s.image_w = 16;
  const YoloLoss loss(s, YoloLossConfig());
  std::vector<float> pred(size_t(s.rows_per_image() * s.outputs()), 0.0f);
  pred[4] = 2.0f;
  const auto res = loss.compute(pred.data(), 1, boxes({{{0, 0.25f, 0.25f, 0.5f, 0.5f}}}), nullptr, 1.0f);
  EXPECT_EQ(res.matched, 1);
  EXPECT_NEAR(res.box, 0.0, 1e-7);
  // objectness (balance 4 for a single level): target ≈ 1 on the matched row, 0 on the 3 others, logit 0
  // (log 2 each) except the matched one (log(1 + e^−2)); mean over 4 rows.
  EXPECT_NEAR(res.obj, 4.0 * (3 * std::log(2.0) + std::log1p(std::exp(-2.0))) / 4, 1e-6);
  // class: logits 0 against targets (1, 0): log 2 each, mean over 2 values; gain 0.5.
  EXPECT_NEAR(res.cls, 0.5 * std::log(2.0), 1e-12);
  EXPECT_NEAR(res.total, res.box + res.obj + res.cls, 1e-15);
  EXPECT_DOUBLE_EQ(res.total_batch, res.total);
}

TEST(YoloLoss, ImageWithoutBoxesHasOnlyObjectness) {
  const DetectHeadSpec s = small_head();
  YoloLossConfig cfg;
  cfg.obj_gain = 0.7f;
  const YoloLoss loss(s, cfg);
  const int64_t N = 2, n = N * s.rows_per_image() * s.outputs();
  std::vector<float> pred(size_t(n), 0.0f), dpred(size_t(n), 99.0f);
  const auto res = loss.compute(pred.data(), N, boxes({{}, {}}), dpred.data(), 3.0f);
  EXPECT_EQ(res.matched, 0);
  EXPECT_EQ(res.box, 0.0);
  EXPECT_EQ(res.cls, 0.0);
  EXPECT_NEAR(res.obj, 0.7 * (4.0 + 1.0) * std::log(2.0), 1e-6);  // log 2 per row, balance {4, 1}
  EXPECT_NEAR(res.total_batch, 2 * res.total, 1e-12);
  // d/d obj = grad_scale · gain · balance · (σ(0) − 0) / rows of the level (both images); 0 elsewhere.
  for (int64_t b = 0; b < N; ++b)
    for (int l = 0; l < 2; ++l)
      for (int64_t r = 0; r < s.level_rows(l); ++r) {
        const float* d = dpred.data() + (b * s.rows_per_image() + s.level_offset(l) + r) * s.outputs();
        const double want = 3.0 * 0.7 * (l == 0 ? 4.0 : 1.0) * 0.5 / double(N * s.level_rows(l));
        EXPECT_NEAR(d[4], want, 1e-7 * want);
        for (int k = 0; k < s.outputs(); ++k)
          if (k != 4) {
            ASSERT_EQ(d[k], 0.0f);
          }
      }
}

TEST(YoloLoss, NoImagesWritesNothing) {
  const YoloLoss loss(small_head(), YoloLossConfig());
  float sentinel = 42.0f;
  const auto res = loss.compute(&sentinel, 0, data::BoxList(), &sentinel, 1.0f);
  EXPECT_EQ(res.total, 0.0);
  EXPECT_EQ(res.matched, 0);
  EXPECT_EQ(sentinel, 42.0f);
}

TEST(YoloLoss, LastMatchOnARowSetsItsObjectnessTarget) {
  // Two boxes of one image on the same cell and anchor: YOLOv5's tobj[b, a, gj, gi] = iou keeps the later.
  const DetectHeadSpec s = small_head();
  const YoloLoss loss(s, YoloLossConfig());
  std::vector<float> pred(size_t(s.rows_per_image() * s.outputs()), 0.0f);
  const auto t = boxes({{{0, 0.3f / 8 + 0.5f / 8, 0.55f / 8, 8.0f / 64, 8.0f / 64},
                         {2, 0.6f / 8, 0.6f / 8, 12.0f / 64, 6.0f / 64}}});
  YoloLoss::Detached det;
  loss.compute(pred.data(), 1, t, nullptr, 1.0f, &det);
  const double p[4] = {0.5, 0.5, 1.0, 1.0};  // logits 0, anchor (1, 1)
  const double second[4] = {0.6, 0.6, 1.5, 0.75};
  EXPECT_NEAR(det.tobj[size_t(s.row(0, 0, 0, 0))], std::max(0.0, ciou(p, second).ciou), 1e-6);
}

TEST(YoloLoss, BadTargetsNameTheProblem) {
  const DetectHeadSpec s = small_head();
  const YoloLoss loss(s, YoloLossConfig());
  std::vector<float> pred(size_t(2 * s.rows_per_image() * s.outputs()), 0.0f);
  try {
    loss.compute(pred.data(), 2, boxes({{}, {{3, 0.5f, 0.5f, 0.1f, 0.1f}}}), nullptr, 1.0f);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("image 1 box 0: class 3 is not an integer in [0, 3)"), std::string::npos)
        << e.message();
  }
  try {
    loss.compute(pred.data(), 2, boxes({{}}), nullptr, 1.0f);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("the targets hold boxes of 1 images, the predictions 2"), std::string::npos)
        << e.message();
  }
  EXPECT_THROW(loss.compute(pred.data(), 1, boxes({{{0, 1.5f, 0.5f, 0.1f, 0.1f}}}), nullptr, 1.0f), Error);
  data::BoxList broken = boxes({{{0, 0.5f, 0.5f, 0.1f, 0.1f}}});
  broken.rows.pop_back();
  EXPECT_THROW(loss.compute(pred.data(), 1, broken, nullptr, 1.0f), Error);
}

// The gradient check: a small head, random logits, boxes matching several anchors, neighbour cells and both
// levels, label smoothing on. Every element of dpred is compared with central differences of
// compute_fixed (the detached CIoU alpha and objectness targets held at their values, as autograd treats
// them). The loss is computed in double from float logits; the difference quotient divides by the step
// actually taken between the two float inputs, so it is accurate to ~1e-9 here (truncation at h = 1e-3 and
// double rounding); the tolerance 2e-6·max|grad| + 1e-4·|grad| leaves room for dpred's float rounding.
TEST(YoloLoss, GradientMatchesFiniteDifferences) {
  const DetectHeadSpec s = small_head();
  YoloLossConfig cfg = scaled_for(s);
  cfg.label_smoothing = 0.1f;
  const YoloLoss loss(s, cfg);
  const int64_t N = 2, no = s.outputs(), n = N * s.rows_per_image() * no;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.7f);  // boxes near their anchors: sizeable alpha
  std::vector<float> pred(static_cast<size_t>(n));
  for (auto& x : pred) x = normal(rng);
  const auto t = boxes({{{1, 2.3f / 8, 5.2f / 8, 10.0f / 64, 12.0f / 64},     // 2 anchors, 3 cells on level 0
                         {0, 0.5f, 0.5f, 0.5f, 0.5f},                         // both levels
                         {2, 0.7f, 0.2f, 20.0f / 64, 9.0f / 64}},
                        {{2, 0.9f, 0.85f, 14.0f / 64, 30.0f / 64},            // right/lower halves
                         {0, 0.41f, 0.47f, 1.0f / 64, 1.0f / 64}}});          // matches nothing
  const float grad_scale = 3.0f;
  std::vector<float> dpred(size_t(n), -7.0f);
  YoloLoss::Detached det;
  const auto res = loss.compute(pred.data(), N, t, dpred.data(), grad_scale, &det);
  ASSERT_GT(res.matched, 20);
  ASSERT_GT(res.box, 0.0);
  ASSERT_GT(res.cls, 0.0);
  EXPECT_EQ(loss.compute_fixed(pred.data(), N, t, det).total, res.total);

  double max_grad = 0;
  for (float g : dpred) max_grad = std::max(max_grad, double(std::abs(g)));
  int checked_box = 0, failures = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> p = pred;
    const float x = pred[size_t(i)], xp = x + 1e-3f, xm = x - 1e-3f;
    p[size_t(i)] = xp;
    const double lp = loss.compute_fixed(p.data(), N, t, det).total;
    p[size_t(i)] = xm;
    const double lm = loss.compute_fixed(p.data(), N, t, det).total;
    const double fd = grad_scale * (lp - lm) / (double(xp) - double(xm));
    const double an = dpred[size_t(i)];
    if (i % no < 4 && fd != 0) ++checked_box;
    if (std::abs(fd - an) > 2e-6 * max_grad + 1e-4 * std::abs(an)) {
      if (++failures <= 10)
        ADD_FAILURE() << "element " << i << " (row " << i / no << ", field " << i % no << "): analytic " << an
                      << ", finite differences " << fd;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GT(checked_box, 4 * 20);  // the box fields of every matched row were exercised
}

TEST(YoloLoss, SameBitsForAnyThreadCount) {
  // Big enough for the parallel objectness pass (4 images of 320 px on YOLOv5's head).
  const DetectHeadSpec s = yolov5_head(10, 320, 320);
  const YoloLoss loss(s, scaled_for(s));
  const int64_t N = 4, n = N * s.rows_per_image() * s.outputs();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> pred(static_cast<size_t>(n));
  for (auto& x : pred) x = normal(rng);
  const auto t = boxes({{{1, 0.3f, 0.4f, 0.2f, 0.1f}}, {}, {{9, 0.7f, 0.7f, 0.5f, 0.6f}, {2, 0.1f, 0.9f, 0.05f, 0.05f}},
                        {{4, 0.5f, 0.5f, 0.9f, 0.9f}}});
  const int saved = omp_get_max_threads();
  std::vector<float> d1(static_cast<size_t>(n)), d2(static_cast<size_t>(n));
  omp_set_num_threads(1);
  const auto r1 = loss.compute(pred.data(), N, t, d1.data(), 4.0f);
  omp_set_num_threads(std::max(2, saved));
  const auto r2 = loss.compute(pred.data(), N, t, d2.data(), 4.0f);
  omp_set_num_threads(saved);
  EXPECT_EQ(std::memcmp(&r1.total, &r2.total, sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(&r1.obj, &r2.obj, sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(d1.data(), d2.data(), d1.size() * sizeof(float)), 0);
  EXPECT_GT(r1.matched, 0);
}

// A batch split over "ranks" (images {0} and {1, 2}), each part's box and class means dividing by the whole
// batch's matches n_l · b/B: the parts' gradients (grad_scale B), weighted b/B as the reduction weights them,
// are the whole batch's, and b × each part's total adds up to B × the whole's (docs/detection.md,
// "Split-independent means"). Each part's own match counts (YOLOv5's DDP) give a different gradient.
TEST(YoloLoss, SplitBatchWithSharedMatchCountsAddsUpToTheWhole) {
  const DetectHeadSpec s = small_head();
  const YoloLoss loss(s, scaled_for(s));
  const int64_t per_image = s.rows_per_image() * s.outputs();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 0.7f);
  std::vector<float> pred(size_t(3 * per_image));
  for (auto& x : pred) x = normal(rng);
  const std::vector<std::array<float, 5>> img0 = {{1, 0.3f, 0.6f, 0.2f, 0.25f}, {0, 0.5f, 0.5f, 0.5f, 0.5f},
                                                  {2, 0.8f, 0.2f, 0.3f, 0.15f}};
  const std::vector<std::array<float, 5>> img1 = {{2, 0.9f, 0.85f, 0.2f, 0.45f}};
  const std::vector<std::array<float, 5>> img2 = {{0, 0.4f, 0.45f, 0.6f, 0.3f}, {1, 0.1f, 0.9f, 0.1f, 0.1f}};
  const double B = 3;
  std::vector<float> whole(pred.size());
  const auto rw = loss.compute(pred.data(), 3, boxes({img0, img1, img2}), whole.data(), float(B));

  const data::BoxList ta = boxes({img0}), tb = boxes({img1, img2});
  const std::vector<int64_t> na = loss.level_matches(ta, 1), nb = loss.level_matches(tb, 2),
                             nw = loss.level_matches(boxes({img0, img1, img2}), 3);
  std::vector<double> norm_a, norm_b;
  for (size_t l = 0; l < nw.size(); ++l) {
    ASSERT_EQ(na[l] + nb[l], nw[l]);
    norm_a.push_back(double(nw[l]) * 1 / B);
    norm_b.push_back(double(nw[l]) * 2 / B);
  }
  std::vector<float> da(static_cast<size_t>(per_image)), db(static_cast<size_t>(2 * per_image)), local_b(db.size());
  const auto ra = loss.compute(pred.data(), 1, ta, da.data(), float(B), nullptr, norm_a);
  const auto rb = loss.compute(pred.data() + per_image, 2, tb, db.data(), float(B), nullptr, norm_b);
  loss.compute(pred.data() + per_image, 2, tb, local_b.data(), float(B));
  EXPECT_NEAR(1 * ra.total + 2 * rb.total, B * rw.total, 1e-12 * B * rw.total);

  double max_grad = 0, max_diff = 0, local_diff = 0;
  for (float g : whole) max_grad = std::max(max_grad, double(std::abs(g)));
  for (int64_t i = 0; i < 3 * per_image; ++i) {
    const double part = i < per_image ? da[size_t(i)] * 1 / B : db[size_t(i - per_image)] * 2 / B;
    max_diff = std::max(max_diff, std::abs(part - whole[size_t(i)]));
    if (i >= per_image)
      local_diff = std::max(local_diff, std::abs(local_b[size_t(i - per_image)] * 2 / B - whole[size_t(i)]));
  }
  EXPECT_LE(max_diff, 1e-6 * max_grad);
  EXPECT_GT(local_diff, 1e-3 * max_grad);
}

TEST(YoloLoss, MatchCountsThatDoNotFitTheHeadAreRefused) {
  const DetectHeadSpec s = small_head();
  const YoloLoss loss(s, scaled_for(s));
  std::vector<float> pred(size_t(s.rows_per_image() * s.outputs()), 0.0f);
  const auto t = boxes({{{0, 0.5f, 0.5f, 0.5f, 0.5f}}});
  EXPECT_THROW(loss.compute(pred.data(), 1, t, nullptr, 1.0f, nullptr, {1.0}), Error);       // one level of two
  EXPECT_THROW(loss.compute(pred.data(), 1, t, nullptr, 1.0f, nullptr, {0.0, 0.0}), Error);  // matches, no count
}
