// ReLU, residual add, accumulate: values by hand and the ReLU gradient by finite differences (inputs kept
// away from the kink at 0).
#include <gtest/gtest.h>

#include <vector>

#include "hetrain/ops.hpp"
#include "op_test_util.hpp"

using namespace hetrain::ops::cpu;
using namespace ops_test;

TEST(Relu, ForwardBackwardByHand) {
  const std::vector<float> x = {-1.f, 0.f, 2.f, -0.5f, 3.f};
  std::vector<float> y(5), d = {1.f, 1.f, 1.f, 1.f, 1.f};
  relu_forward(y.data(), x.data(), 5);
  EXPECT_EQ(y, (std::vector<float>{0.f, 0.f, 2.f, 0.f, 3.f}));
  relu_backward(d.data(), d.data(), y.data(), 5);  // din may alias dout
  EXPECT_EQ(d, (std::vector<float>{0.f, 0.f, 1.f, 0.f, 1.f}));
}

TEST(ReluGrad, FiniteDifferences) {
  auto x = away_from_zero(300, 1);
  const auto G = random_vec<double>(300, 2);
  std::vector<double> y(300), dx(300);
  auto loss = [&] {
    relu_forward(y.data(), x.data(), 300);
    return dot(y, G);
  };
  loss();
  relu_backward(dx.data(), G.data(), y.data(), 300);
  expect_gradient("din", x, dx, loss);
}

TEST(AddAccumulate, ByHandIncludingLargeParallelSizes) {
  for (int64_t n : {int64_t(7), int64_t(1) << 18}) {
    std::vector<float> a(n), b(n), out(n);
    for (int64_t i = 0; i < n; ++i) a[i] = float(i % 100), b[i] = float(2 * (i % 7));
    add_forward(out.data(), a.data(), b.data(), n);
    accumulate(out.data(), b.data(), n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += out[i] != a[i] + 2 * b[i];
    EXPECT_EQ(bad, 0) << "n=" << n;
  }
}
