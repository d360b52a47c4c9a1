// The split solver against brute force, bounds, zeros, proportional shares, bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "hetrain/dist/balance.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::dist;

namespace {
// Smallest max_r t_r(b_r) over every composition of B with 0 ≤ b_r ≤ caps[r].
double brute_force_best(const std::vector<CostModel>& m, const std::vector<int64_t>& caps, int64_t B) {
  double best = 1e300;
  std::vector<int64_t> b(m.size());
  std::function<void(size_t, int64_t)> rec = [&](size_t r, int64_t left) {
    if (r + 1 == m.size()) {
      if (left > caps[r]) return;
      b[r] = left;
      best = std::min(best, predicted_step_seconds(m, b));
      return;
    }
    for (int64_t x = 0; x <= std::min(left, caps[r]); ++x) {
      b[r] = x;
      rec(r + 1, left - x);
    }
  };
  rec(0, B);
  return best;
}

void expect_valid(const std::vector<int64_t>& b, const std::vector<int64_t>& caps, int64_t B) {
  ASSERT_EQ(std::accumulate(b.begin(), b.end(), int64_t(0)), B);
  for (size_t r = 0; r < b.size(); ++r) {
    EXPECT_GE(b[r], 0);
    if (!caps.empty()) {
      EXPECT_LE(b[r], caps[r]);
    }
  }
}
}  // namespace

TEST(SolveSplit, OptimalAgainstBruteForce) {
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> alpha(0.0, 0.05), beta(0.001, 0.02), coin(0, 1);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = 1 + int(rng() % 4);
    const int64_t B = int64_t(rng() % 14);
    std::vector<CostModel> m(static_cast<size_t>(n));
    std::vector<int64_t> caps(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      m[r] = {coin(rng) < 0.3 ? 0.0 : alpha(rng), beta(rng)};
      caps[r] = coin(rng) < 0.5 ? B : int64_t(rng() % (B + 1));
    }
    if (std::accumulate(caps.begin(), caps.end(), int64_t(0)) < B) continue;
    std::vector<int64_t> b = solve_split(m, caps, B);
    expect_valid(b, caps, B);
    double best = brute_force_best(m, caps, B);
    ASSERT_NEAR(predicted_step_seconds(m, b), best, 1e-12) << "trial " << trial << " n=" << n << " B=" << B;
    ++checked;
  }
  EXPECT_GT(checked, 2000);
}

TEST(SolveSplit, ProportionalSharesWithoutFixedCost) {
  // α = 0, β = 1/s: the step time is at most one sample of the slowest rank above the continuous optimum
  // B/Σs, so each share is within s_r/s_min of B·s_r/Σs (min-max optima are not unique: a fast rank may
  // take extra samples up to the slow rank's time).
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> speed(0.1, 10.0);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + int(rng() % 8);
    const int64_t B = 1 + int64_t(rng() % 1000);
    std::vector<CostModel> m(static_cast<size_t>(n));
    std::vector<double> s(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) s[r] = speed(rng), m[r] = {0.0, 1.0 / s[r]};
    std::vector<int64_t> b = solve_split(m, {}, B);
    expect_valid(b, {}, B);
    double total = std::accumulate(s.begin(), s.end(), 0.0);
    double s_min = *std::min_element(s.begin(), s.end());
    EXPECT_LE(predicted_step_seconds(m, b), double(B) / total + 1.0 / s_min + 1e-9);
    for (int r = 0; r < n; ++r)
      EXPECT_LE(std::abs(double(b[r]) - B * s[r] / total), std::max(1.0, s[r] / s_min) + 1e-9) << "rank " << r;
  }
}

TEST(SolveSplit, ExactProportionalCase) {
  std::vector<CostModel> m = {{0, 1.0}, {0, 1.0}, {0, 2.0}, {0, 4.0}};  // speeds 1, 1, 0.5, 0.25
  EXPECT_EQ(solve_split(m, {}, 88), (std::vector<int64_t>{32, 32, 16, 8}));
}

TEST(SolveSplit, VerySlowRankGetsZero) {
  std::vector<CostModel> m = {{0.0, 0.001}, {0.0, 0.001}, {5.0, 1.0}};
  std::vector<int64_t> b = solve_split(m, {}, 64);
  expect_valid(b, {}, 64);
  EXPECT_EQ(b[2], 0);
  EXPECT_EQ(b[0], 32);
  EXPECT_EQ(b[1], 32);
}

TEST(SolveSplit, CapsAreRespected) {
  std::vector<CostModel> m = {{0, 0.001}, {0, 0.01}, {0, 0.01}};
  std::vector<int64_t> caps = {10, 100, 100};
  std::vector<int64_t> b = solve_split(m, caps, 60);
  expect_valid(b, caps, 60);
  EXPECT_EQ(b, (std::vector<int64_t>{10, 25, 25}));
}

TEST(SolveSplit, DeterministicTiesGoToLowerRanks) {
  std::vector<CostModel> m(4, CostModel{0.01, 0.001});
  EXPECT_EQ(solve_split(m, {}, 10), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(uniform_split(4, 10, {}), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(uniform_split(3, 2, {}), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(uniform_split(3, 9, {1, 10, 10}), (std::vector<int64_t>{1, 4, 4}));
}

TEST(SolveSplit, ClearErrors) {
  std::vector<CostModel> m(2, CostModel{0, 1});
  try {
    solve_split(m, {3, 4}, 8);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("caps sum to 7 < global batch 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(solve_split(m, {3}, 2), Error);
  EXPECT_THROW(solve_split({}, {}, 2), Error);
  EXPECT_THROW(solve_split(m, {}, -1), Error);
  EXPECT_THROW(solve_split({{-1.0, 1.0}, {0, 1}}, {}, 4), Error);
  EXPECT_EQ(solve_split(m, {}, 0), (std::vector<int64_t>{0, 0}));
}

TEST(SolveSplit, FlatModelsStillSumToB) {
  // β = 0 (free samples) and all-zero models: the water level jumps; the split must still be valid.
  std::vector<CostModel> m = {{0.1, 0.0}, {0.2, 0.0}, {0.0, 0.0}};
  std::vector<int64_t> b = solve_split(m, {5, 5, 5}, 12);
  expect_valid(b, {5, 5, 5}, 12);
  EXPECT_NEAR(predicted_step_seconds(m, b), brute_force_best(m, {5, 5, 5}, 12), 1e-15);
}

TEST(SolveSplit, MinimumShareForBatchNorm) {
  EXPECT_EQ(respect_min_share({1, 7}, 2), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(respect_min_share({0, 1, 7}, 2), (std::vector<int64_t>{0, 2, 6}));
  EXPECT_EQ(respect_min_share({1, 2}, 2), (std::vector<int64_t>{0, 3}));   // the donor would drop below 2
  EXPECT_EQ(respect_min_share({1, 1, 1}, 2), (std::vector<int64_t>{0, 3, 0}));
  EXPECT_EQ(respect_min_share({1}, 2), (std::vector<int64_t>{1}));        // one rank: nowhere to move it
  EXPECT_EQ(respect_min_share({5, 0, 3}, 2), (std::vector<int64_t>{5, 0, 3}));
  EXPECT_EQ(respect_min_share({1, 7}, 1), (std::vector<int64_t>{1, 7}));  // no batch norm: unchanged
  for (int64_t B : {1, 2, 3, 5, 9, 64}) {
    std::vector<int64_t> s = respect_min_share({B / 4, B / 4, B - 2 * (B / 4), 0}, 2);
    int64_t sum = 0;
    for (int64_t b : s) {
      sum += b;
      if (B >= 2) {
        EXPECT_TRUE(b == 0 || b >= 2) << B;
      }
    }
    EXPECT_EQ(sum, B);
  }
}

// ---------------------------------------------------------------- the one rounding rule
TEST(RoundLargestRemainder, ExamplesOfTheRule) {
  EXPECT_EQ(round_largest_remainder({1.5, 1.5, 1.0}, 4), (std::vector<int64_t>{2, 1, 1}));  // tie: lower rank
  EXPECT_EQ(round_largest_remainder({0.3, 2.9, 0.8}, 4), (std::vector<int64_t>{0, 3, 1}));
  EXPECT_EQ(round_largest_remainder({0.2, 0.2}, 3), (std::vector<int64_t>{2, 1}));         // round after round
  EXPECT_EQ(round_largest_remainder({3.0, 3.0}, 8, {4, 3}), (std::vector<int64_t>{4, 3}));  // caps hold less
  EXPECT_EQ(round_largest_remainder({2.7, 1.3}, 4, {2, 5}), (std::vector<int64_t>{2, 2}));  // capped floor
  EXPECT_EQ(round_largest_remainder({}, 0), (std::vector<int64_t>{}));
  EXPECT_THROW(round_largest_remainder({1.0, 2.0}, 3, {1}), Error);
  EXPECT_THROW(round_largest_remainder({-1.0, 2.0}, 1), Error);
}

// Random shares whose exact values sum to the total: the sum is kept, each share is within 1 of its exact
// value and never past its cap, and a share rounded up never has a smaller fractional part than one rounded
// down (equal parts: the lower rank is the one rounded up).
TEST(RoundLargestRemainder, PropertiesOverRandomShares) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t n = 1 + rng() % 9;
    const int64_t total = int64_t(rng() % 300);
    std::vector<double> weight(n), exact(n);
    for (double& w : weight) w = double(rng() % 7);  // zeros and ties on purpose
    const double sum = std::accumulate(weight.begin(), weight.end(), 0.0);
    for (size_t r = 0; r < n; ++r) exact[r] = sum > 0 ? weight[r] * double(total) / sum : 0.0;
    if (sum == 0) exact[0] = double(total);
    std::vector<int64_t> caps(n);
    for (size_t r = 0; r < n; ++r) caps[r] = int64_t(std::ceil(exact[r])) + int64_t(rng() % 3);
    for (bool capped : {false, true}) {
      const std::vector<int64_t> b = round_largest_remainder(exact, total, capped ? caps : std::vector<int64_t>{});
      ASSERT_EQ(std::accumulate(b.begin(), b.end(), int64_t(0)), total) << "trial " << trial;
      for (size_t r = 0; r < n; ++r) {
        ASSERT_LT(std::fabs(double(b[r]) - exact[r]), 1.0) << "trial " << trial << " rank " << r;
        if (capped) {
          ASSERT_LE(b[r], caps[r]);
        }
      }
      auto frac = [&](size_t r) { return exact[r] - std::floor(exact[r]); };
      for (size_t up = 0; up < n; ++up)
        for (size_t down = 0; down < n; ++down) {
          if (!(double(b[up]) > exact[up]) || !(double(b[down]) < exact[down])) continue;
          ASSERT_GE(frac(up), frac(down)) << "trial " << trial;
          if (frac(up) == frac(down)) {
            ASSERT_LT(up, down) << "trial " << trial << ": a tie goes to the lower rank";
          }
        }
    }
  }
}
