// ops/upsample: nearest-neighbour upsampling — values by hand, the Tensor-level entry against a plain loop
// (including sizes that take the OpenMP path, bit-identical for any thread count), finite-difference
// gradients in double, N = 0, and the errors of bad shapes.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "tensor_op_test_util.hpp"
#include "ops/upsample/upsample.hpp"

using namespace hetrain;
using namespace hetrain::ops;
using namespace ops_test;

namespace {

// The definitions, one element at a time.
std::vector<float> upsample_ref(const std::vector<float>& x, int64_t planes, int64_t H, int64_t W, int64_t f) {
  std::vector<float> y(size_t(planes * H * f * W * f));
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < H * f; ++oy)
      for (int64_t ox = 0; ox < W * f; ++ox)
        y[size_t((p * H * f + oy) * W * f + ox)] = x[size_t((p * H + oy / f) * W + ox / f)];
  return y;
}
std::vector<double> upsample_backward_ref(const std::vector<float>& dy, int64_t planes, int64_t H, int64_t W,
                                          int64_t f) {
  std::vector<double> dx(size_t(planes * H * W), 0.0);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oy = 0; oy < H * f; ++oy)
      for (int64_t ox = 0; ox < W * f; ++ox)
        dx[size_t((p * H + oy / f) * W + ox / f)] += dy[size_t((p * H * f + oy) * W * f + ox)];
  return dx;
}
}  // namespace

TEST(UpsampleNearest, ForwardByHand) {
  Tensor x = tensor_of({1, 1, 2, 2}, {1, 2, 3, 4}), y({1, 1, 4, 4});
  upsample_nearest_forward(y, x, 2);
  EXPECT_EQ(values(y), (std::vector<float>{1, 1, 2, 2,  //
                                           1, 1, 2, 2,  //
                                           3, 3, 4, 4,  //
                                           3, 3, 4, 4}));
  // Factor 3 on a 1×2 plane, two planes.
  Tensor x3 = tensor_of({1, 2, 1, 2}, {5, 6, 7, 8}), y3({1, 2, 3, 6});
  upsample_nearest_forward(y3, x3, 3);
  EXPECT_EQ(values(y3), (std::vector<float>{5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6,  //
                                            7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8}));
  // Factor 1 is a copy.
  Tensor y1({1, 2, 1, 2});
  upsample_nearest_forward(y1, x3, 1);
  EXPECT_EQ(values(y1), values(x3));
}

// dy 1..16 on a 4×4 plane, f = 2: each dx is the sum of its 2×2 block; dx starts as NaN (overwritten).
TEST(UpsampleNearest, BackwardByHandOverwrites) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = float(i + 1);
  Tensor dy = tensor_of({1, 1, 4, 4}, v), dx({1, 1, 2, 2});
  dx.fill(std::numeric_limits<float>::quiet_NaN());
  upsample_nearest_backward(dx, dy, 2);
  EXPECT_EQ(values(dx), (std::vector<float>{1 + 2 + 5 + 6, 3 + 4 + 7 + 8, 9 + 10 + 13 + 14, 11 + 12 + 15 + 16}));
}

// Odd sizes, several factors, and [2, 16, 40, 40] × 2 (204800 outputs: the OpenMP path). The backward sums
// up to 16 values in [−1, 1] in float: against the exact (double) sum, 1e-5 covers its rounding and still
// catches a missing or doubled element.
TEST(UpsampleNearest, MatchesPlainLoopAnyThreadCount) {
  struct Case { Shape x; int f; };
  for (const Case& c :
       {Case{{2, 3, 5, 7}, 2}, Case{{1, 4, 3, 2}, 3}, Case{{3, 1, 1, 1}, 4}, Case{{2, 16, 40, 40}, 2}}) {
    SCOPED_TRACE(shape_str(c.x) + " f=" + std::to_string(c.f));
    const int64_t planes = c.x[0] * c.x[1], H = c.x[2], W = c.x[3];
    Tensor x = tensor_of(c.x, random_vec<float>(size_t(shape_numel(c.x)), 3));
    Tensor y({c.x[0], c.x[1], H * c.f, W * c.f});
    upsample_nearest_forward(y, x, c.f);
    EXPECT_EQ(values(y), upsample_ref(values(x), planes, H, W, c.f));

    Tensor dy = tensor_of(y.shape(), random_vec<float>(size_t(y.numel()), 4));
    Tensor dx(c.x), dx1(c.x), dx3(c.x);
    upsample_nearest_backward(dx, dy, c.f);
    expect_close("dx", values(dx), upsample_backward_ref(values(dy), planes, H, W, c.f), 1e-5, 0);
    with_threads(1, [&] { upsample_nearest_backward(dx1, dy, c.f); });
    with_threads(3, [&] { upsample_nearest_backward(dx3, dy, c.f); });
    EXPECT_EQ(values(dx1), values(dx)) << "the thread count changed the bits";
    EXPECT_EQ(values(dx3), values(dx)) << "the thread count changed the bits";
  }
}

// L = Σ y ⊙ G in double: dL/dx by the backward vs central differences.
TEST(UpsampleNearestGrad, FiniteDifferences) {
  for (int f : {2, 3}) {
    SCOPED_TRACE("f=" + std::to_string(f));
    const int64_t planes = 2 * 3, H = 3, W = 4;
    auto x = random_vec<double>(size_t(planes * H * W), 11);
    const auto G = random_vec<double>(size_t(planes * H * f * W * f), 12);
    std::vector<double> y(G.size()), dx(x.size());
    auto loss = [&] {
      upsample_nearest_forward_cpu(y.data(), x.data(), planes, H, W, f);
      return dot(y, G);
    };
    upsample_nearest_backward_cpu(dx.data(), G.data(), planes, H, W, f);
    expect_gradient("dx", x, dx, loss);
    expect_sharp(x, dx, loss);
  }
}

TEST(UpsampleNearest, EmptyBatch) {
  Tensor x({0, 3, 2, 2}), y({0, 3, 4, 4});
  EXPECT_NO_THROW(upsample_nearest_forward(y, x, 2));
  EXPECT_NO_THROW(upsample_nearest_backward(x, y, 2));
}

TEST(UpsampleNearest, BadShapesNameTheOp) {
  Tensor x({2, 3, 4, 5});
  expect_error("upsample_nearest_forward", "output is [2, 3, 8, 8], expected [2, 3, 8, 10]",
               [&] { upsample_nearest_forward(Tensor({2, 3, 8, 8}), x, 2); });
  expect_error("upsample_nearest_forward", "factor must be at least 1",
               [&] { upsample_nearest_forward(Tensor({2, 3, 4, 5}), x, 0); });
  expect_error("upsample_nearest_forward", "input must be 4-D",
               [&] { upsample_nearest_forward(Tensor({6, 8, 10}), Tensor({6, 4, 5}), 2); });
  expect_error("upsample_nearest_backward", "output gradient is [2, 3, 8, 9], expected [2, 3, 8, 10]",
               [&] { upsample_nearest_backward(x, Tensor({2, 3, 8, 9}), 2); });
  expect_error("upsample_nearest_backward", "output gradient is [1, 3, 8, 10]",
               [&] { upsample_nearest_backward(x, Tensor({1, 3, 8, 10}), 2); });
}

TEST(UpsampleNearest, RegisteredForEveryBuiltDevice) {
  for (const auto* table : {&upsample_nearest_forward_impl, &upsample_nearest_backward_impl}) {
    EXPECT_TRUE(table->has(Device::CPU)) << table->name();
    EXPECT_EQ(table->has(Device::CUDA), cuda_built()) << table->name();
  }
}
