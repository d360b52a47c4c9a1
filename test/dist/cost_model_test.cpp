// Cost model fitting: exact on noiseless data, sane on noisy data, robust when b never changes.
#include <gtest/gtest.h>

#include <random>

#include "hetrain/dist/balance.hpp"

using namespace hetrain::dist;

TEST(CostModel, PredictIsZeroForNoSamples) {
  CostModel m{0.5, 0.25};
  EXPECT_EQ(m.predict(0), 0.0);
  EXPECT_DOUBLE_EQ(m.predict(4), 1.5);
}

TEST(CostModel, RecoversAlphaBetaFromNoiselessData) {
  CostWindow w(10, 0.8);
  for (int64_t b : {16, 24, 16, 24, 32, 8}) w.add(b, 0.02 + 0.003 * double(b));
  CostModel m = w.fit(nullptr);
  EXPECT_NEAR(m.alpha, 0.02, 1e-12);
  EXPECT_NEAR(m.beta, 0.003, 1e-13);
}

TEST(CostModel, SaneOnNoisyData) {
  std::mt19937 rng(42);
  std::normal_distribution<double> noise(0.0, 0.03);  // 3% multiplicative noise
  CostWindow w(40, 0.95);
  for (int i = 0; i < 40; ++i) {
    int64_t b = (i % 2) ? 16 : 48;
    w.add(b, (0.01 + 0.002 * double(b)) * (1.0 + noise(rng)));
  }
  CostModel m = w.fit(nullptr);
  EXPECT_GE(m.alpha, 0.0);
  EXPECT_NEAR(m.beta, 0.002, 0.0004);
  EXPECT_NEAR(m.predict(32), 0.01 + 0.002 * 32, 0.003);
}

TEST(CostModel, OneDistinctBatchSizeKeepsPreviousShape) {
  CostModel prev{0.01, 0.001};
  CostWindow w(8, 0.9);
  for (int i = 0; i < 8; ++i) w.add(20, 3.0 * prev.predict(20));  // 3x slower, same b throughout
  CostModel m = w.fit(&prev);
  EXPECT_NEAR(m.alpha, 0.03, 1e-12);
  EXPECT_NEAR(m.beta, 0.003, 1e-13);
  // Without a previous model: proportional, α = 0.
  CostModel p = w.fit(nullptr);
  EXPECT_EQ(p.alpha, 0.0);
  EXPECT_NEAR(p.beta, 3.0 * prev.predict(20) / 20.0, 1e-13);
}

TEST(CostModel, NeverNegative) {
  // Decreasing time with b (noise): slope would be negative → fall back, never negative.
  CostWindow w(4, 1.0);
  w.add(10, 0.05);
  w.add(20, 0.04);
  CostModel m = w.fit(nullptr);
  EXPECT_GE(m.alpha, 0.0);
  EXPECT_GT(m.beta, 0.0);
  // A steep line through a negative intercept: α clamps to 0, β through the origin.
  CostWindow v(4, 1.0);
  v.add(10, 0.01);
  v.add(20, 0.05);
  CostModel q = v.fit(nullptr);
  EXPECT_EQ(q.alpha, 0.0);
  EXPECT_GT(q.beta, 0.0);
}

TEST(CostModel, ZeroBatchSamplesCarryNoInformation) {
  CostModel prev{0.0, 0.002};
  CostWindow w(4, 1.0);
  w.add(0, 0.0);
  w.add(0, 1e-5);
  CostModel m = w.fit(&prev);
  EXPECT_EQ(m.alpha, prev.alpha);
  EXPECT_EQ(m.beta, prev.beta);
  CostModel none = w.fit(nullptr);
  EXPECT_EQ(none.beta, 0.0);  // unknown: the planner substitutes the median slope
}

TEST(CostModel, WindowKeepsOnlyRecentSamples) {
  CostWindow w(3, 1.0);
  for (int i = 0; i < 5; ++i) w.add(10 + i, 1.0);  // old, to be dropped
  EXPECT_EQ(w.size(), 3);
  for (int64_t b : {10, 20, 30}) w.add(b, 0.001 * double(b));
  CostModel m = w.fit(nullptr);
  EXPECT_NEAR(m.alpha, 0.0, 1e-12);
  EXPECT_NEAR(m.beta, 0.001, 1e-12);
}

// A regime change (the rank became 3x slower) is fitted from the samples after the change alone, so the
// next plan follows at once instead of averaging the old machine in; noise that flips direction is not a
// regime change.
TEST(CostWindow, FitsOnlyTheNewRegimeAfterAShift) {
  const CostModel before{0.0, 1e-3};
  CostWindow w(20, 0.9);
  for (int i = 0; i < 15; ++i) w.add(64, 64e-3);
  for (int i = 0; i < 6; ++i) w.add(64, 3 * 64e-3);
  CostModel after = w.fit(&before);
  EXPECT_NEAR(after.predict(64), 3 * 64e-3, 1e-9) << "only the 6 slow samples count";

  CostWindow noisy(20, 0.9);
  for (int i = 0; i < 19; ++i) noisy.add(64, 64e-3 * (i % 2 ? 1.3 : 0.7));
  CostModel fit = noisy.fit(&before);
  EXPECT_NEAR(fit.predict(64), 64e-3, 0.2 * 64e-3) << "alternating noise is averaged, not taken as a shift";

  CostWindow two(20, 0.9);  // four slow samples are not yet a regime change (noise can do that)
  for (int i = 0; i < 15; ++i) two.add(64, 64e-3);
  for (int i = 0; i < 4; ++i) two.add(64, 3 * 64e-3);
  EXPECT_LT(two.fit(&before).predict(64), 2.5 * 64e-3);
}

// Two nearby batch sizes with noisy times can fit nearly all time as fixed cost (β → 0: a rank that looks
// infinitely fast per sample). α is capped at half the mean step time.
TEST(CostModel, FixedCostIsCappedAtHalfTheStepTime) {
  // b = 64 → 60 ms, b = 96 → 61 ms: least squares says α ≈ 58 ms, β ≈ 0.03 ms.
  std::vector<CostSample> s = {{64, 60e-3}, {96, 61e-3}, {64, 60e-3}, {96, 61e-3}};
  std::vector<double> w(s.size(), 1.0);
  CostModel m = fit_cost_model(s, w, nullptr);
  const double mean_t = 60.5e-3;
  EXPECT_NEAR(m.alpha, 0.5 * mean_t, 1e-12);
  EXPECT_NEAR(m.predict(80), mean_t, 1e-9) << "the capped model still passes through the mean point";
  EXPECT_GT(m.beta, 0.3e-3);
}

// The balancer's early refit (Balancer::off_model): the newest steps all far off the model, one way.
TEST(CostModel, NewestOffSeesASustainedChangeOnly) {
  const CostModel model{0.0, 0.01};  // 10 ms per sample
  CostWindow w(20, 0.9);
  for (int i = 0; i < 10; ++i) w.add(16, 0.16 * (i % 2 ? 1.2 : 0.85));  // noise within ±20%
  EXPECT_FALSE(w.newest_off(model, 2, 2.0));
  w.add(16, 0.64);  // a straggler: 4x slower
  EXPECT_FALSE(w.newest_off(model, 2, 2.0)) << "one slow step is not yet a change";
  w.add(16, 0.62);
  EXPECT_TRUE(w.newest_off(model, 2, 2.0));
  w.add(16, 0.04);  // back to 4x faster than the (slow) model would say: the directions differ
  EXPECT_FALSE(w.newest_off(model, 2, 2.0));
  CostWindow recovered(20, 0.9);
  recovered.add(16, 0.04);
  recovered.add(16, 0.05);
  EXPECT_TRUE(recovered.newest_off(CostModel{0.0, 0.04}, 2, 2.0)) << "faster than the model counts too";
  EXPECT_FALSE(CostWindow(20, 0.9).newest_off(model, 2, 2.0)) << "no samples, no change";
}
