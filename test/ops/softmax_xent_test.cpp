// Softmax cross-entropy with label smoothing: a hand-computed loss and gradient, finite differences
// (double), stability with huge logits, and top-1 counting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"
#include "op_test_util.hpp"
#include "ops/softmax_xent/softmax_xent.hpp"

using namespace hetrain::ops::cpu;
using namespace ops_test;

// logits (1, 2, 3), label 0, ε = 0.1, K = 3: target (0.9333…, 0.0333…, 0.0333…),
// loss = log(e¹ + e² + e³) − 0.9333…·1 − 0.0333…·(2 + 3) = 2.3076059644443805 (computed by hand in Python).
TEST(SoftmaxXent, LabelSmoothingMatchesHandComputedValue) {
  const std::vector<double> logits = {1, 2, 3};
  const std::vector<int32_t> labels = {0};
  std::vector<double> probs(3), d(3);
  const double loss = softmax_xent_forward(probs.data(), logits.data(), labels.data(), 1, 3, 0.1);
  EXPECT_NEAR(loss, 2.3076059644443805, 1e-14);
  softmax_xent_backward(d.data(), probs.data(), labels.data(), 1, 3, 0.1, 1.0);
  EXPECT_NEAR(d[0], -0.8433027601629529, 1e-14);
  EXPECT_NEAR(d[1], 0.21139513772146437, 1e-14);
  EXPECT_NEAR(d[2], 0.6319076224414887, 1e-14);
  // ε = 0: plain cross-entropy −log p_label.
  EXPECT_NEAR(softmax_xent_forward(probs.data(), logits.data(), labels.data(), 1, 3, 0.0),
              std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 1.0, 1e-14);
}

TEST(SoftmaxXentGrad, FiniteDifferences) {
  const int N = 4, K = 7;
  auto logits = random_vec<double>(N * K, 3, -3.0, 3.0);
  const std::vector<int32_t> labels = {0, 6, 3, 3};
  std::vector<double> probs(N * K), d(N * K, 5.0);
  for (double eps : {0.0, 0.1}) {
    auto loss = [&] { return softmax_xent_forward(probs.data(), logits.data(), labels.data(), N, K, eps); };
    loss();
    softmax_xent_backward(d.data(), probs.data(), labels.data(), N, K, eps, 1.0 / N);
    expect_gradient(eps == 0 ? "dlogits eps=0" : "dlogits eps=0.1", logits, d, loss);
  }
}

TEST(SoftmaxXent, StableWithHugeLogits) {
  const std::vector<float> logits = {1000.f, 1001.f, -1000.f, 88.f, 89.f, 90.f};
  const std::vector<int32_t> labels = {1, 0};
  std::vector<float> probs(6);
  const float loss = softmax_xent_forward(probs.data(), logits.data(), labels.data(), 2, 3, 0.0f);
  // row 0: −log σ(1) = log(1 + e⁻¹); row 1: log(1 + e + e²) − 0 relative to the max (= 2 − 0 shift)
  const double want = 0.5 * (std::log1p(std::exp(-1.0)) + std::log(std::exp(-2.0) + std::exp(-1.0) + 1.0) + 2.0);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_NEAR(loss, want, 1e-5);
  for (int n = 0; n < 2; ++n) EXPECT_NEAR(probs[3 * n] + probs[3 * n + 1] + probs[3 * n + 2], 1.0f, 1e-6f);
}

TEST(SoftmaxXent, RejectsLabelOutOfRange) {
  const std::vector<float> logits = {1.f, 2.f};
  const std::vector<int32_t> labels = {2};
  std::vector<float> probs(2);
  EXPECT_THROW(softmax_xent_forward(probs.data(), logits.data(), labels.data(), 1, 2, 0.0f), hetrain::Error);
}

TEST(Top1, CountsArgmaxHitsFirstMaxWinsTies) {
  const std::vector<float> logits = {0.1f, 0.9f, 0.3f,   // argmax 1
                                     2.0f, 2.0f, 1.0f,   // tie: 0 wins
                                     -1.f, -2.f, -0.5f,  // argmax 2
                                     5.0f, 4.0f, 3.0f};  // argmax 0
  const std::vector<int32_t> labels = {1, 1, 2, 1};
  EXPECT_EQ(top1_correct(logits.data(), labels.data(), 4, 3), 2);
}

// The loss op (ops::SoftmaxXentLoss, what the local step calls on every device) on the CPU: the same
// loss, count and gradient as the functions above with separate buffers. Its backward runs in place on the
// probabilities, which once overwrote the label's probability before reading it.
TEST(SoftmaxXentLoss, OnTheCpuEqualsTheFunctionsBitForBit) {
  const int N = 5, K = 7;
  const std::vector<float> values = random_vec<float>(size_t(N) * K, 11, -3.0, 3.0);
  const std::vector<int32_t> labels = {0, 6, 3, 3, 1};
  hetrain::Tensor logits({N, K});
  std::copy(values.begin(), values.end(), logits.data());
  std::vector<float> probs(size_t(N) * K), want(size_t(N) * K);
  const float mean = softmax_xent_forward(probs.data(), values.data(), labels.data(), N, K, 0.1f);
  softmax_xent_backward(want.data(), probs.data(), labels.data(), N, K, 0.1f, 0.5f / float(N));
  hetrain::ops::SoftmaxXentLoss loss;
  const hetrain::Tensor d = loss.compute(logits, labels.data(), 0.1f, /*want_gradient=*/true, 0.5f);
  double loss_sum = 0, correct = 0;
  loss.read(&loss_sum, &correct);
  EXPECT_EQ(loss_sum, double(mean) * N);
  EXPECT_EQ(correct, double(top1_correct(values.data(), labels.data(), N, K)));
  ASSERT_EQ(d.numel(), int64_t(N) * K);
  for (int i = 0; i < N * K; ++i) EXPECT_EQ(d.data()[i], want[size_t(i)]) << "element " << i;
}
