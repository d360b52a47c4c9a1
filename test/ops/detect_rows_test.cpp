// ops/detect_rows: the Detect head's layout change — values by hand, two levels filling one rows tensor
// (each writes only its own rows) against the definition, the round trip back, sizes that take the OpenMP
// path, finite-difference gradients in double, N = 0, and the errors of bad shapes.
#include <gtest/gtest.h>
#include <omp.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "tensor_op_test_util.hpp"
#include "ops/detect_rows/detect_rows.hpp"

using namespace hetrain;
using namespace hetrain::ops;
using namespace ops_test;

namespace {

// Counts the elements of out that differ from the definition for the level x [N, na·no, H, W] at row_offset.
int64_t level_mismatches(const Tensor& out, int64_t row_offset, const Tensor& x, int64_t na) {
  const int64_t N = x.dim(0), no = x.dim(1) / na, H = x.dim(2), W = x.dim(3), A = out.dim(1);
  int64_t bad = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t a = 0; a < na; ++a)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xx = 0; xx < W; ++xx)
          for (int64_t f = 0; f < no; ++f)
            bad += out[(n * A + row_offset + (a * H + y) * W + xx) * no + f] !=
                   x[((n * na + a) * no + f) * H * W + y * W + xx];
  return bad;
}
}  // namespace

// na = 2 anchors, no = 3 fields, a 1×2 grid; x[c, p] = 10·c + p. Rows 1..4 of a 6-row out: (anchor, pixel)
// in order, each row the anchor's three channels at that pixel; rows 0 and 5 belong to other levels.
TEST(DetectRows, ForwardByHand) {
  std::vector<float> v;
  for (int c = 0; c < 6; ++c)
    for (int p = 0; p < 2; ++p) v.push_back(float(10 * c + p));
  Tensor x = tensor_of({1, 6, 1, 2}, v), out = filled({1, 6, 3}, -1);
  detect_rows_forward(out, 1, x, 2);
  EXPECT_EQ(values(out), (std::vector<float>{-1, -1, -1,   //
                                             0, 10, 20,    // anchor 0, pixel 0
                                             1, 11, 21,    // anchor 0, pixel 1
                                             30, 40, 50,   // anchor 1, pixel 0
                                             31, 41, 51,   // anchor 1, pixel 1
                                             -1, -1, -1}));
}

// The inverse: dx (NaN before, overwritten) gathers rows 1..4 of dout; rows 0 and 5 are another level's.
TEST(DetectRows, BackwardByHandOverwrites) {
  std::vector<float> d(18);
  for (int i = 0; i < 18; ++i) d[size_t(i)] = float(i);
  Tensor dout = tensor_of({1, 6, 3}, d), dx = filled({1, 6, 1, 2}, std::numeric_limits<float>::quiet_NaN());
  detect_rows_backward(dx, dout, 1, 2);
  // dx[a·3 + f, p] = dout[1 + 2a + p, f] = 3·(1 + 2a + p) + f.
  EXPECT_EQ(values(dx), (std::vector<float>{3, 6, 4, 7, 5, 8, 9, 12, 10, 13, 11, 14}));
}

// Three levels (grids 6×5, 3×3, 1×2; na = 3, no = 7; N = 2) fill one rows tensor; each level's backward
// gives its map back. A second pass on YOLOv5s-sized maps at 320 px (40×40, 20×20, 10×10; no = 85) takes the
// OpenMP path; 1 and 3 threads give the same bits.
TEST(DetectRows, LevelsFillTheRowsAndComeBackAnyThreadCount) {
  struct Grid { int64_t H, W; };
  struct Case { int64_t N, na, no; std::vector<Grid> grids; };
  for (const Case& c : {Case{2, 3, 7, {{6, 5}, {3, 3}, {1, 2}}}, Case{1, 3, 85, {{40, 40}, {20, 20}, {10, 10}}}}) {
    int64_t A = 0;
    std::vector<int64_t> offsets;
    std::vector<Tensor> xs;
    for (const Grid& g : c.grids) {
      offsets.push_back(A);
      A += c.na * g.H * g.W;
      const Shape s = {c.N, c.na * c.no, g.H, g.W};
      xs.push_back(tensor_of(s, random_vec<float>(size_t(shape_numel(s)), uint32_t(40 + xs.size()))));
    }
    for (int threads : {1, 3}) {
      SCOPED_TRACE("no=" + std::to_string(c.no) + " threads=" + std::to_string(threads));
      Tensor out = filled({c.N, A, c.no}, std::numeric_limits<float>::quiet_NaN());
      with_threads(threads, [&] {
        for (size_t l = 0; l < xs.size(); ++l) detect_rows_forward(out, offsets[l], xs[l], c.na);
      });
      for (size_t l = 0; l < xs.size(); ++l)
        EXPECT_EQ(level_mismatches(out, offsets[l], xs[l], c.na), 0) << "level " << l;
      for (size_t l = 0; l < xs.size(); ++l) {
        Tensor dx = filled(xs[l].shape(), std::numeric_limits<float>::quiet_NaN());
        with_threads(threads, [&] { detect_rows_backward(dx, out, offsets[l], c.na); });
        EXPECT_EQ(values(dx), values(xs[l])) << "level " << l;
      }
    }
  }
}

// L = Σ out ⊙ G in double over a rows tensor with other levels' rows on both sides (their G does not reach
// this level's dx): dL/dx by the backward vs central differences.
TEST(DetectRowsGrad, FiniteDifferences) {
  DetectRowsGeom g;
  g.N = 2, g.anchors = 3, g.fields = 4, g.H = 2, g.W = 3, g.row_offset = 5;
  g.rows = g.row_offset + g.anchors * g.H * g.W + 7;
  auto x = random_vec<double>(size_t(g.N * g.anchors * g.fields * g.H * g.W), 50);
  const auto G = random_vec<double>(size_t(g.N * g.rows * g.fields), 51);
  std::vector<double> out(G.size(), 0.0), dx(x.size());
  auto loss = [&] {
    detect_rows_forward_cpu(out.data(), x.data(), g);
    return dot(out, G);
  };
  detect_rows_backward_cpu(dx.data(), G.data(), g);
  expect_gradient("dx", x, dx, loss);
  expect_sharp(x, dx, loss);
}

TEST(DetectRows, EmptyBatch) {
  Tensor x({0, 12, 2, 2}), out({0, 20, 4});
  EXPECT_NO_THROW(detect_rows_forward(out, 4, x, 3));
  EXPECT_NO_THROW(detect_rows_backward(x, out, 4, 3));
}

TEST(DetectRows, BadShapesNameTheOp) {
  Tensor x({2, 12, 2, 2});  // na = 3, no = 4: 12 rows
  expect_error("detect_rows_forward", "12 channels, not a positive multiple of na = 5",
               [&] { detect_rows_forward(Tensor({2, 12, 4}), 0, x, 5); });
  expect_error("detect_rows_forward", "na (anchors) must be at least 1",
               [&] { detect_rows_forward(Tensor({2, 12, 4}), 0, x, 0); });
  expect_error("detect_rows_forward", "output is [2, 12, 5], expected [2, 12, 4]",
               [&] { detect_rows_forward(Tensor({2, 12, 5}), 0, x, 3); });
  expect_error("detect_rows_forward", "output is [1, 12, 4], expected [2, 12, 4]",
               [&] { detect_rows_forward(Tensor({1, 12, 4}), 0, x, 3); });
  expect_error("detect_rows_forward", "rows [1, 13) do not fit the 12 rows of output",
               [&] { detect_rows_forward(Tensor({2, 12, 4}), 1, x, 3); });
  expect_error("detect_rows_forward", "rows [-1, 11) do not fit",
               [&] { detect_rows_forward(Tensor({2, 12, 4}), -1, x, 3); });
  expect_error("detect_rows_forward", "output must be 3-D", [&] { detect_rows_forward(Tensor({24, 4}), 0, x, 3); });
  expect_error("detect_rows_forward", "input must be 4-D",
               [&] { detect_rows_forward(Tensor({2, 12, 4}), 0, Tensor({2, 12, 4}), 3); });
  expect_error("detect_rows_backward", "output gradient is [2, 11, 3], expected [2, 11, 4]",
               [&] { detect_rows_backward(x, Tensor({2, 11, 3}), 0, 3); });
  expect_error("detect_rows_backward", "rows [0, 12) do not fit the 11 rows of output gradient",
               [&] { detect_rows_backward(x, Tensor({2, 11, 4}), 0, 3); });
}

TEST(DetectRows, RegisteredForEveryBuiltDevice) {
  for (const auto* table : {&detect_rows_forward_impl, &detect_rows_backward_impl}) {
    EXPECT_TRUE(table->has(Device::CPU)) << table->name();
    EXPECT_EQ(table->has(Device::CUDA), cuda_built()) << table->name();
  }
}
