// test/support/checks.hpp — what every test group generates and compares with: seeded random values and
// the atol + rtol·|ref| comparison. The gradient check by finite differences is its neighbour,
// test/support/gradient_check.hpp. Test headers of one group (test/<group>/*_util.hpp) build on these.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace test_support {

// n values uniform in [lo, hi) (the top 53 bits of a 64-bit Mersenne twister, scaled in T's arithmetic):
// the same for a seed everywhere this project builds.
template <typename T>
std::vector<T> random_vec(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 gen(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = T(lo) + T(hi - lo) * T(double(gen() >> 11) * 0x1.0p-53);
  return v;
}

// n class labels uniform in [0, K).
inline std::vector<int32_t> random_labels(size_t n, int K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, K - 1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// |got − ref| ≤ atol + rtol·|ref| element-wise; a NaN matches only a NaN (an Inf only the same Inf).
// Reports the first 5 mismatches, their count and the largest finite difference.
template <typename T, typename U>
void expect_close(const std::string& what, const std::vector<T>& got, const std::vector<U>& ref, double atol,
                  double rtol) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    const bool ok = (std::isnan(g) && std::isnan(r)) || g == r || std::abs(g - r) <= atol + rtol * std::abs(r);
    if (std::isfinite(g) && std::isfinite(r)) worst = std::max(worst, std::abs(g - r));
    if (!ok && bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: got " << g << ", reference " << r;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements outside " << atol << " + "
                     << rtol << "·|ref| (largest difference " << worst << ")";
}

}  // namespace test_support
