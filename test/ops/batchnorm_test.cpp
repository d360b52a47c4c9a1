// Batch norm: finite-difference gradients (double), running-statistics update and eval semantics checked
// against hand-computed numbers, and float accuracy when the mean dwarfs the spread.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"
#include "op_test_util.hpp"

using namespace hetrain::ops::cpu;
using namespace ops_test;

TEST(BatchNormGrad, FiniteDifferencesTrainMode) {
  const int N = 3, C = 2, HW = 5;
  auto x = random_vec<double>(N * C * HW, 1, -2.0, 2.0);
  auto gamma = random_vec<double>(C, 2, 0.5, 1.5);
  auto beta = random_vec<double>(C, 3);
  const auto G = random_vec<double>(N * C * HW, 4);
  std::vector<double> y(x.size()), mean(C), invstd(C);
  // Running stats are not needed for the gradient (null: not updated).
  auto loss = [&] {
    batchnorm_forward_train<double>(y.data(), mean.data(), invstd.data(), nullptr, nullptr, x.data(),
                                    gamma.data(), beta.data(), N, C, HW, 0.1, 1e-5);
    return dot(y, G);
  };
  loss();
  std::vector<double> dx(x.size(), 99.0), dgamma(C), dbeta(C);
  batchnorm_backward(dx.data(), dgamma.data(), dbeta.data(), G.data(), x.data(), gamma.data(), mean.data(),
                     invstd.data(), N, C, HW);
  expect_gradient("din", x, dx, loss);
  expect_gradient("dgamma", gamma, dgamma, loss);
  expect_gradient("dbeta", beta, dbeta, loss);
}

TEST(BatchNormGrad, ParameterGradientsAccumulate) {
  const int N = 2, C = 3, HW = 4;
  const auto x = random_vec<double>(N * C * HW, 5), G = random_vec<double>(N * C * HW, 6);
  const std::vector<double> gamma(C, 1.0), beta(C, 0.0);
  std::vector<double> y(x.size()), mean(C), invstd(C), dx(x.size());
  batchnorm_forward_train<double>(y.data(), mean.data(), invstd.data(), nullptr, nullptr, x.data(), gamma.data(),
                                  beta.data(), N, C, HW, 0.1, 1e-5);
  std::vector<double> dg1(C), db1(C), dg2(C, 1.0), db2(C, -1.0);
  batchnorm_backward(dx.data(), dg1.data(), db1.data(), G.data(), x.data(), gamma.data(), mean.data(),
                     invstd.data(), N, C, HW);
  batchnorm_backward(dx.data(), dg2.data(), db2.data(), G.data(), x.data(), gamma.data(), mean.data(),
                     invstd.data(), N, C, HW);
  for (int c = 0; c < C; ++c) {
    EXPECT_NEAR(dg2[c], dg1[c] + 1.0, 1e-12);
    EXPECT_NEAR(db2[c], db1[c] - 1.0, 1e-12);
  }
}

// One channel, N = 2, HW = 2, x = {1, 2 | 3, 6}: mean 3, biased variance 14/4 = 3.5, unbiased 14/3.
TEST(BatchNorm, TrainingUpdatesRunningStatsLikePyTorch) {
  const std::vector<float> x = {1, 2, 3, 6};
  const std::vector<float> gamma = {2.0f}, beta = {0.5f};
  std::vector<float> y(4), mean(1), invstd(1), rmean = {0.5f}, rvar = {2.0f};
  batchnorm_forward_train(y.data(), mean.data(), invstd.data(), rmean.data(), rvar.data(), x.data(), gamma.data(),
                          beta.data(), 2, 1, 2, 0.1f, 1e-5f);
  EXPECT_FLOAT_EQ(mean[0], 3.0f);
  EXPECT_FLOAT_EQ(invstd[0], 0.5345217202229368f);  // 1/√(3.5 + 1e-5)
  EXPECT_FLOAT_EQ(rmean[0], 0.9f * 0.5f + 0.1f * 3.0f);             // 0.75
  EXPECT_FLOAT_EQ(rvar[0], 0.9f * 2.0f + 0.1f * (14.0f / 3.0f));    // 2.2666…
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], 2.0f * (x[i] - 3.0f) * 0.5345217202229368f + 0.5f, 1e-6);
}

TEST(BatchNorm, EvalUsesRunningStatsAndIsPerSample) {
  const int N = 4, C = 2, HW = 3;
  const auto x = random_vec<float>(N * C * HW, 7, -3.0, 3.0);
  const std::vector<float> gamma = {1.5f, -0.5f}, beta = {0.25f, 1.0f}, rmean = {0.2f, -0.4f}, rvar = {2.0f, 0.5f};
  std::vector<float> y(x.size());
  batchnorm_forward_eval(y.data(), x.data(), gamma.data(), beta.data(), rmean.data(), rvar.data(), N, C, HW, 1e-5f);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int j = 0; j < HW; ++j) {
        const int i = (n * C + c) * HW + j;
        const double want = gamma[c] * (x[i] - rmean[c]) / std::sqrt(rvar[c] + 1e-5) + beta[c];
        EXPECT_NEAR(y[i], want, 1e-5) << i;
      }
  // Eval normalises each sample on its own: sample 1 alone gives the same output as inside the batch.
  std::vector<float> y1(C * HW);
  batchnorm_forward_eval(y1.data(), x.data() + C * HW, gamma.data(), beta.data(), rmean.data(), rvar.data(), 1, C,
                         HW, 1e-5f);
  for (int i = 0; i < C * HW; ++i) EXPECT_EQ(y1[i], y[C * HW + i]);
  // Training does not: the same sample alone gets different statistics.
  std::vector<float> yt(x.size()), yt1(C * HW), m(C), s(C);
  batchnorm_forward_train<float>(yt.data(), m.data(), s.data(), nullptr, nullptr, x.data(), gamma.data(),
                                 beta.data(), N, C, HW, 0.1f, 1e-5f);
  batchnorm_forward_train<float>(yt1.data(), m.data(), s.data(), nullptr, nullptr, x.data() + C * HW,
                                 gamma.data(), beta.data(), 1, C, HW, 0.1f, 1e-5f);
  double diff = 0;
  for (int i = 0; i < C * HW; ++i) diff += std::abs(yt1[i] - yt[C * HW + i]);
  EXPECT_GT(diff, 1e-3);
}

// Float inputs of mean 1e4 and std 1: the one-pass E[x²] − E[x]² formula would lose every digit of the
// variance; two passes in double keep the normalised output at mean 0, variance 1.
TEST(BatchNorm, FloatStableForLargeMean) {
  const int N = 8, C = 1, HW = 256;
  auto x = random_vec<float>(N * HW, 8, -1.7320508, 1.7320508);  // uniform with variance 1
  for (auto& v : x) v += 1e4f;
  const std::vector<float> gamma = {1.f}, beta = {0.f};
  std::vector<float> y(x.size()), mean(1), invstd(1);
  batchnorm_forward_train<float>(y.data(), mean.data(), invstd.data(), nullptr, nullptr, x.data(), gamma.data(),
                                 beta.data(), N, C, HW, 0.1f, 0.f);
  double s = 0, ss = 0;
  for (float v : y) s += v, ss += double(v) * v;
  EXPECT_NEAR(s / y.size(), 0.0, 1e-3);
  EXPECT_NEAR(ss / y.size(), 1.0, 1e-3);
}

TEST(BatchNorm, RejectsSingleValuePerChannelInTraining) {
  std::vector<float> x = {1.f, 2.f}, y(2), m(2), s(2), g = {1.f, 1.f}, b = {0.f, 0.f};
  EXPECT_THROW(batchnorm_forward_train<float>(y.data(), m.data(), s.data(), nullptr, nullptr, x.data(), g.data(),
                                              b.data(), 1, 2, 1, 0.1f, 1e-5f),
               hetrain::Error);
}
