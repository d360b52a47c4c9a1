// Pooling: max, average (padding counts as zeros) and global average — values by hand, finite-difference
// gradients (double; max pooling on distinct inputs so no tie flips within a step).
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"
#include "op_test_util.hpp"

using namespace hetrain;
using namespace hetrain::ops::cpu;
using namespace ops_test;

namespace {
Pool2dGeom pgeom(int N, int C, int H, int W, int kernel, int stride, int pad) {
  Pool2dGeom g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.kernel = kernel, g.stride = stride, g.pad = pad;
  return g;
}
size_t in_size(const Pool2dGeom& g) { return size_t(g.N) * g.C * g.H * g.W; }
size_t out_size(const Pool2dGeom& g) { return size_t(g.N) * g.C * g.P() * g.Q(); }
}  // namespace

// 3×3 input 1..9, kernel 2 stride 1: maxima 5 6 8 9 at flat indices 4 5 7 8; avg (1+2+4+5)/4 = 3 …
TEST(Pool2d, ByHand) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto g = pgeom(1, 1, 3, 3, 2, 1, 0);
  std::vector<float> y(4);
  std::vector<int32_t> am(4);
  maxpool2d_forward(y.data(), am.data(), x.data(), g);
  EXPECT_EQ(y, (std::vector<float>{5, 6, 8, 9}));
  EXPECT_EQ(am, (std::vector<int32_t>{4, 5, 7, 8}));
  avgpool2d_forward(y.data(), x.data(), g);
  EXPECT_EQ(y, (std::vector<float>{3, 4, 6, 7}));
  // Padding 1, kernel 3, stride 2 → 2×2 output; corner window sees 1 2 4 5 plus five zero pads: 12/9.
  const auto gp = pgeom(1, 1, 3, 3, 3, 2, 1);
  avgpool2d_forward(y.data(), x.data(), gp);
  EXPECT_FLOAT_EQ(y[0], 12.f / 9.f);
  EXPECT_FLOAT_EQ(y[3], 28.f / 9.f);  // 5 6 8 9
  // Max pooling with padding ignores the pads (they are not zeros) when every value is negative.
  std::vector<float> neg(9);
  for (int i = 0; i < 9; ++i) neg[i] = -x[i];
  maxpool2d_forward(y.data(), am.data(), neg.data(), gp);
  EXPECT_EQ(y, (std::vector<float>{-1, -2, -4, -5}));
  EXPECT_EQ(am, (std::vector<int32_t>{0, 1, 3, 4}));
}

// Max pooling against a plain loop over each window on shapes with padding, overlap, odd sizes and ties
// (values drawn from a handful of levels): same maxima, and the argmax is the first maximum in the window's
// row-major order. A NaN anywhere in a window makes its output NaN.
TEST(Pool2d, MaxMatchesPlainLoopWithTiesAndNaN) {
  for (const auto& g : {pgeom(2, 3, 7, 6, 3, 2, 1), pgeom(1, 2, 6, 8, 2, 2, 0), pgeom(2, 2, 9, 11, 3, 1, 1),
                        pgeom(1, 3, 12, 13, 5, 3, 2), pgeom(3, 1, 5, 4, 1, 1, 0)}) {
    SCOPED_TRACE(::testing::Message() << "H=" << g.H << " W=" << g.W << " kernel=" << g.kernel
                                      << " stride=" << g.stride << " pad=" << g.pad);
    auto x = random_vec<float>(in_size(g), 9);
    for (auto& v : x) v = float(int(v * 3));  // few distinct levels: many ties
    std::vector<float> y(out_size(g));
    std::vector<int32_t> am(out_size(g));
    maxpool2d_forward(y.data(), am.data(), x.data(), g);
    const int P = g.P(), Q = g.Q();
    for (int pl = 0; pl < g.N * g.C; ++pl)
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          float best = 0;
          int at = -1;
          for (int r = 0; r < g.kernel; ++r)
            for (int c = 0; c < g.kernel; ++c) {
              const int h = p * g.stride - g.pad + r, w = q * g.stride - g.pad + c;
              if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
              const float v = x[size_t(pl) * g.H * g.W + h * g.W + w];
              if (at < 0 || v > best) best = v, at = h * g.W + w;
            }
          const size_t o = size_t(pl) * P * Q + p * Q + q;
          ASSERT_EQ(y[o], best) << "plane " << pl << " output " << p << "," << q;
          ASSERT_EQ(am[o], at) << "plane " << pl << " output " << p << "," << q;
        }
    x[size_t(g.H / 2) * g.W + g.W / 2] = std::numeric_limits<float>::quiet_NaN();
    maxpool2d_forward(y.data(), am.data(), x.data(), g);
    int nans = 0;
    for (size_t o = 0; o < size_t(P) * Q; ++o) nans += y[o] != y[o];
    EXPECT_GE(nans, 1) << "a NaN input must reach the outputs whose windows hold it";
  }
}

TEST(Pool2dGrad, MaxFiniteDifferences) {
  for (const auto& g : {pgeom(2, 3, 7, 6, 3, 2, 1), pgeom(1, 2, 6, 8, 2, 2, 0)}) {
    auto x = distinct_values(in_size(g), 5);
    const auto G = random_vec<double>(out_size(g), 6);
    std::vector<double> y(out_size(g)), dx(in_size(g), 3.0);
    std::vector<int32_t> am(out_size(g));
    auto loss = [&] {
      maxpool2d_forward(y.data(), am.data(), x.data(), g);
      return dot(y, G);
    };
    loss();
    maxpool2d_backward(dx.data(), G.data(), am.data(), g);
    expect_gradient("maxpool din", x, dx, loss, 1e-4);
  }
}

TEST(Pool2dGrad, AvgFiniteDifferences) {
  for (const auto& g : {pgeom(2, 3, 7, 6, 3, 2, 1), pgeom(1, 2, 5, 5, 3, 1, 1)}) {
    auto x = random_vec<double>(in_size(g), 7);
    const auto G = random_vec<double>(out_size(g), 8);
    std::vector<double> y(out_size(g)), dx(in_size(g), 3.0);
    auto loss = [&] {
      avgpool2d_forward(y.data(), x.data(), g);
      return dot(y, G);
    };
    avgpool2d_backward(dx.data(), G.data(), g);
    expect_gradient("avgpool din", x, dx, loss);
  }
}

TEST(GlobalAvgPool, ByHandAndFiniteDifferences) {
  const std::vector<float> xf = {1, 2, 3, 4, 10, 20, 30, 40};  // N=1, C=2, HW=4
  std::vector<float> yf(2);
  global_avgpool_forward(yf.data(), xf.data(), 1, 2, 4);
  EXPECT_EQ(yf, (std::vector<float>{2.5f, 25.f}));

  const int N = 2, C = 3, HW = 5;
  auto x = random_vec<double>(N * C * HW, 9);
  const auto G = random_vec<double>(N * C, 10);
  std::vector<double> y(N * C), dx(N * C * HW);
  auto loss = [&] {
    global_avgpool_forward(y.data(), x.data(), N, C, HW);
    return dot(y, G);
  };
  global_avgpool_backward(dx.data(), G.data(), N, C, HW);
  expect_gradient("global avgpool din", x, dx, loss);
}

TEST(Pool2d, RejectsAWindowLargerThanTheInput) {
  std::vector<float> x(2), y(2);
  std::vector<int32_t> am(2);
  EXPECT_EQ(pgeom(1, 1, 1, 2, 4, 4, 0).P(), 0);  // (1 − 4) / 4 + 1 truncates to 1
  EXPECT_THROW(maxpool2d_forward(y.data(), am.data(), x.data(), pgeom(1, 1, 1, 2, 4, 4, 0)), hetrain::Error);
}

TEST(Pool2d, RejectsPaddingLargerThanHalfKernel) {
  std::vector<float> x(9), y(16);
  std::vector<int32_t> am(16);
  EXPECT_THROW(maxpool2d_forward(y.data(), am.data(), x.data(), pgeom(1, 1, 3, 3, 2, 1, 2)), hetrain::Error);
}
