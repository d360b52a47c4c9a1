// YOLOv5's modules (nn/yolo_modules.hpp) and small graph models checked against central finite differences:
// Conv (3×3 and the 6×6 stem), Bottleneck with and without its shortcut, C3, SPPF, Upsample, and graphs with
// a Concat, an Add, an output read by several layers (its gradient is a sum) and a Detect head.
//
// As test/nn/grad_check_test.cpp: the loss is L = Σ y ⊙ R with a fixed random R summed in double, so
// dL/dy = R exactly; a point whose one-sided slopes disagree sits on a kink (a max-pool switch here; SiLU is
// smooth) and is skipped, and such points must stay rare. Batch norm in training mode couples the batch.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hetrain/nn.hpp"
#include "nn/graph_model.hpp"
#include "nn/graph_yaml.hpp"
#include "nn/init.hpp"
#include "nn/yolo_modules.hpp"
#include "grad_check_util.hpp"
#include "test_util.hpp"

using namespace hetrain;
using namespace hetrain::nn;
using namespace hetrain::nn::test;

namespace {

std::vector<Point> sample_input(const Tensor& x, const Tensor& dx, int count, uint64_t seed) {
  std::vector<Point> pts;
  std::mt19937_64 pick(seed);
  for (int k = 0; k < count; ++k) {
    const int64_t j = static_cast<int64_t>(pick() % static_cast<uint64_t>(x.numel()));
    pts.push_back({"x[" + std::to_string(j) + "]", x.data() + j, dx[j]});
  }
  return pts;
}

void expect_good(const CheckResult& r) {
  EXPECT_EQ(r.bad, 0);
  EXPECT_LE(r.skipped * 10, r.checked + r.skipped) << "too many points on kinks";
  EXPECT_GE(r.nonzero * 2, r.checked) << "too few non-zero gradients for a meaningful check";
}

// Non-trivial batch-norm affine parameters, so their gradients are exercised away from 1 and 0.
void randomize_bn(ParamBuffer& pb) {
  for (size_t i = 0; i < pb.specs().size(); ++i) {
    const ParamSpec& s = pb.specs()[i];
    if (s.kind == ParamKind::BnWeight || s.kind == ParamKind::BnBias)
      test::fill_uniform(pb.param(int(i)), 5 + uint64_t(s.offset), 0.5f, 1.5f);
  }
}

// One layer on its own: its parameters' and its input's gradients, with or without a buffer pool; a first
// step runs before the checked one, so pooled buffers come back holding stale values.
void check_layer(Layer& layer, ParamBuffer& pb, const Shape& in, bool pooled, int input_points = 16,
                 float h = 1e-3f) {
  Workspace ws;
  if (pooled) layer.set_buffer_pool(&ws);
  init_parameters(pb, 21);
  randomize_bn(pb);
  Tensor x(in);
  test::fill_uniform(x, 6);
  Tensor r;
  {
    Tensor y = layer.forward(x, true);
    r = Tensor(y.shape());
    test::fill_uniform(r, 7);
  }
  layer.backward(r);  // the first step
  pb.grads().zero();
  layer.forward(x, true);
  const Tensor dx = layer.backward(r).clone();
  ASSERT_EQ(dx.shape(), x.shape());
  std::vector<Point> pts = sample_params(pb, 3, 8);
  const std::vector<Point> xs = sample_input(x, dx, input_points, 9);
  pts.insert(pts.end(), xs.begin(), xs.end());
  expect_good(check_points(pts, [&] { return dot(layer.forward(x, true), r); }, h, 4e-3, 3e-2));
}

}  // namespace

TEST(YoloModules, ConvGradients) {
  for (const bool pooled : {false, true}) {
    SCOPED_TRACE(pooled ? "pooled" : "own buffers");
    ParamBuffer pb;
    Workspace ws;
    YoloConv conv(pb, "c", 3, 4, 3, 2, 1, true, &ws);
    pb.finalize();
    EXPECT_EQ(pb.specs()[0].name, "c.conv.weight");
    EXPECT_EQ(pb.specs()[1].name, "c.bn.weight");
    EXPECT_EQ(pb.specs().size(), 3u);  // no conv bias
    check_layer(conv, pb, {3, 3, 7, 7}, pooled);
  }
}

TEST(YoloModules, StemConvGradients) {  // 6×6, stride 2, padding 2
  ParamBuffer pb;
  Workspace ws;
  YoloConv conv(pb, "stem", 2, 4, 6, 2, 2, true, &ws);
  pb.finalize();
  check_layer(conv, pb, {2, 2, 8, 8}, true);
}

TEST(YoloModules, BottleneckGradients) {
  for (const bool shortcut : {true, false}) {
    SCOPED_TRACE(shortcut ? "shortcut" : "no shortcut");
    ParamBuffer pb;
    Workspace ws;
    YoloBottleneck b(pb, "b", 4, 4, shortcut, 0.5, &ws);
    pb.finalize();
    EXPECT_EQ(b.adds_shortcut(), shortcut);
    EXPECT_EQ(pb.specs()[0].shape, (Shape{2, 4, 1, 1}));  // cv1 to c2·e
    check_layer(b, pb, {3, 4, 5, 5}, true);
  }
  ParamBuffer pb;  // c1 != c2: no shortcut whatever the flag says
  Workspace ws;
  YoloBottleneck b(pb, "b", 3, 4, true, 0.5, &ws);
  pb.finalize();
  EXPECT_FALSE(b.adds_shortcut());
  check_layer(b, pb, {3, 3, 5, 5}, false);
}

TEST(YoloModules, C3Gradients) {
  for (const bool shortcut : {true, false}) {
    SCOPED_TRACE(shortcut ? "shortcut" : "no shortcut");
    ParamBuffer pb;
    Workspace ws;
    C3 c3(pb, "c3", 4, 6, 2, shortcut, 0.5, &ws);
    pb.finalize();
    EXPECT_GE(pb.find("c3.m.1.cv2.conv.weight"), 0);
    EXPECT_EQ(pb.specs()[size_t(pb.find("c3.cv3.conv.weight"))].shape, (Shape{6, 6, 1, 1}));
    check_layer(c3, pb, {3, 4, 5, 5}, shortcut);
  }
}

TEST(YoloModules, SppfGradients) {
  for (const bool pooled : {false, true}) {
    SCOPED_TRACE(pooled ? "pooled" : "own buffers");
    ParamBuffer pb;
    Workspace ws;
    SPPF sppf(pb, "s", 4, 6, 5, &ws);
    pb.finalize();
    EXPECT_EQ(pb.specs()[size_t(pb.find("s.cv2.conv.weight"))].shape, (Shape{6, 8, 1, 1}));  // 4 × c1/2 in
    // Three chained pools behind batch norm: the forward's float rounding moves the loss by ~1e-5, so a
    // step of 1e-3 leaves 5% noise on some input points (x[3]: 0.157 at 1e-3, 0.150 at 5e-4, 0.1643 at 2e-3
    // and 4e-3 against 0.1641 analytic); 2e-3 is past the noise.
    check_layer(sppf, pb, {2, 4, 7, 7}, pooled, 24, 2e-3f);
  }
}

TEST(YoloModules, UpsampleGradients) {
  ParamBuffer pb;
  pb.finalize();
  UpsampleNearest up(2);
  check_layer(up, pb, {2, 3, 3, 4}, true);
}

// The finite-difference check catches a missing gradient term: the Bottleneck's input gradient without
// the shortcut's share is reported wrong.
TEST(YoloModules, GradCheckCatchesAMissingShortcutTerm) {
  ParamBuffer pb;
  Workspace ws;
  YoloBottleneck b(pb, "b", 4, 4, true, 0.5, &ws);
  pb.finalize();
  init_parameters(pb, 21);
  Tensor x({3, 4, 5, 5});
  test::fill_uniform(x, 6);
  Tensor r(b.forward(x, true).shape());
  test::fill_uniform(r, 7);
  Tensor dx = b.backward(r).clone();
  for (int64_t i = 0; i < dx.numel(); ++i) dx[i] -= r[i];  // as if the shortcut's share were left out
  const CheckResult res = check_points(sample_input(x, dx, 16, 9), [&] { return dot(b.forward(x, true), r); },
                                       1e-3f, 4e-3, 3e-2, /*report_each=*/false);
  EXPECT_GE(res.bad * 2, res.checked);
}

namespace {

// A whole graph model: every parameter tensor sampled.
void check_graph(const std::string& text, int c, int hw, int n, int per_tensor) {
  ModelConfig cfg;
  cfg.name = "test.yaml", cfg.in_channels = c, cfg.height = hw, cfg.width = hw, cfg.num_classes = 0;
  GraphModel m(parse_graph_text(text, "test.yaml"), cfg);
  m.init(11);
  randomize_bn(m.params());
  Tensor x({n, c, hw, hw});
  test::fill_uniform(x, 1);
  Shape out = m.output_shape();
  out.insert(out.begin(), n);
  Tensor r(out);
  test::fill_uniform(r, 2);
  ParamBuffer& pb = m.params();
  m.forward(x, true);
  m.backward(r);  // a first step: pooled buffers come back stale
  pb.grads().zero();
  m.forward(x, true);
  m.backward(r);
  expect_good(check_points(sample_params(pb, per_tensor, 3), [&] { return dot(m.forward(x, true), r); }, 1e-3f,
                           4e-3, 3e-2));
}

}  // namespace

// Layer 0's output is read by layers 1, 3 and 5 (its gradient is the sum of three); layer 6 concatenates
// one output with itself; Add hands one gradient to two inputs.
TEST(GraphGradients, ConcatAddAndSharedOutputs) {
  check_graph(R"(
nc: 3
backbone:
  - [-1, 1, Conv, [8, 3, 1]]                    # 0
  - [-1, 1, Conv, [8, 3, 2]]                    # 1  reads 0
  - [-1, 1, nn.Upsample, [None, 2, 'nearest']]  # 2
  - [[-1, 0], 1, Concat, [1]]                   # 3  reads 0
  - [-1, 1, C3, [8]]                            # 4
  - [[-1, 0], 1, Add, []]                       # 5  reads 0
  - [[-1, -1], 1, Concat, [1]]                  # 6  reads 5 twice
head:
  - [-1, 2, Bottleneck, [16]]                   # 7  two copies, model.7.0 and model.7.1
  - [-1, 1, GlobalAvgPool, []]                  # 8
  - [-1, 1, Linear, [nc]]                       # 9
)",
              2, 6, 2, 3);
}

// A Detect head on two levels, one of which (layer 0) also feeds layer 1.
TEST(GraphGradients, DetectHead) {
  check_graph(R"(
nc: 2
anchors: [[10,13, 16,30], [30,61, 62,45]]
backbone:
  - [-1, 1, Conv, [8, 3, 2]]
  - [-1, 1, SPPF, [8, 3]]
  - [-1, 1, Conv, [8, 3, 2]]
head:
  - [[0, 2], 1, Detect, [nc, anchors]]
)",
              2, 8, 2, 4);
}

// Detect's rows: level, anchor, y, x; each row the 5 + nc outputs of one anchor at one cell.
TEST(GraphGradients, DetectRowLayout) {
  ModelConfig cfg;
  cfg.name = "t.yaml", cfg.in_channels = 2, cfg.height = 8, cfg.width = 8, cfg.num_classes = 0;
  GraphModel m(parse_graph_text(R"(
nc: 1
anchors: [[10,13, 16,30], [30,61, 62,45]]
backbone:
  - [-1, 1, Conv2d, [4, 1, 2]]
  - [-1, 1, Conv2d, [4, 1, 2]]
head:
  - [[0, 1], 1, Detect, [nc, anchors]]
)",
                                "t.yaml"),
               cfg);
  m.init(1);
  // Level convs: weight zero, bias b[a·6 + f] = 100·level + 10·a + f, so every row says where it came from.
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.2.m." + std::to_string(l);
    m.params().param(m.params().find(p + ".weight")).fill(0.0f);
    Tensor b = m.params().param(m.params().find(p + ".bias"));
    for (int a = 0; a < 2; ++a)
      for (int f = 0; f < 6; ++f) b[a * 6 + f] = float(100 * l + 10 * a + f);
  }
  Tensor x({1, 2, 8, 8});
  const Tensor y = m.forward(x, false);
  ASSERT_EQ(y.shape(), (Shape{1, 2 * 16 + 2 * 4, 6}));
  for (int64_t row = 0; row < 40; ++row) {
    const int l = row < 32 ? 0 : 1, cells = l == 0 ? 16 : 4;
    const int64_t in_level = row - (l == 0 ? 0 : 32);
    const int a = int(in_level / cells);
    for (int f = 0; f < 6; ++f) ASSERT_EQ(y[row * 6 + f], float(100 * l + 10 * a + f)) << row;
  }
  EXPECT_EQ(m.detect_head()->strides, (std::vector<int>{2, 4}));
}
