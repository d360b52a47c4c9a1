// Linear layer: hand-computed forward, finite-difference gradients (double), accumulate contract.
#include <gtest/gtest.h>

#include <vector>

#include "hetrain/ops.hpp"
#include "op_test_util.hpp"

using namespace hetrain::ops::cpu;
using namespace ops_test;

TEST(Linear, ForwardByHand) {
  const std::vector<float> in = {1, 2, 3, 4, 5, 6};           // [2, 3]
  const std::vector<float> w = {1, 0, -1, 0.5f, 0.5f, 0.5f};  // [2, 3]
  const std::vector<float> b = {10, 20};
  std::vector<float> out(4);
  linear_forward(out.data(), in.data(), w.data(), b.data(), 2, 3, 2);
  EXPECT_EQ(out, (std::vector<float>{8, 23, 8, 27.5f}));
}

TEST(LinearGrad, FiniteDifferences) {
  const int N = 3, I = 5, O = 4;
  auto x = random_vec<double>(N * I, 1), w = random_vec<double>(O * I, 2), b = random_vec<double>(O, 3);
  const auto G = random_vec<double>(N * O, 4);
  std::vector<double> y(N * O);
  auto loss = [&] {
    linear_forward(y.data(), x.data(), w.data(), b.data(), N, I, O);
    return dot(y, G);
  };
  // Parameter gradients start at 1 and must end at 1 + gradient.
  std::vector<double> dx(x.size(), 7.0), dw(w.size(), 1.0), db(O, 1.0);
  linear_backward(dx.data(), dw.data(), db.data(), G.data(), x.data(), w.data(), N, I, O);
  for (auto& v : dw) v -= 1.0;
  for (auto& v : db) v -= 1.0;
  expect_gradient("din", x, dx, loss);
  expect_gradient("dweight", w, dw, loss);
  expect_gradient("dbias", b, db, loss);
}

// A sample's output and input gradient are the same bits whatever batch it is computed in (the balancer
// changes every rank's batch size; invariant 1): 37 samples at once against the same samples as 5 + 32.
TEST(Linear, PerSampleResultsDoNotDependOnTheBatchSize) {
  const int N = 37, I = 400, O = 120, head = 5;
  const auto x = random_vec<float>(size_t(N) * I, 11), w = random_vec<float>(size_t(O) * I, 12),
             dy = random_vec<float>(size_t(N) * O, 13);
  std::vector<float> y(size_t(N) * O), y_parts(y.size()), dx(x.size()), dx_parts(x.size());
  linear_forward<float>(y.data(), x.data(), w.data(), nullptr, N, I, O);
  linear_forward<float>(y_parts.data(), x.data(), w.data(), nullptr, head, I, O);
  linear_forward<float>(y_parts.data() + head * O, x.data() + head * I, w.data(), nullptr, N - head, I, O);
  EXPECT_EQ(y, y_parts);
  linear_backward<float>(dx.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), N, I, O);
  linear_backward<float>(dx_parts.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), head, I, O);
  linear_backward<float>(dx_parts.data() + head * I, nullptr, nullptr, dy.data() + head * O, x.data() + head * I,
                         w.data(), N - head, I, O);
  EXPECT_EQ(dx, dx_parts);
}
