// test/ops/op_test_util.hpp — helpers shared by the op tests: seeded random tensors, the central-difference
// gradient check, and the atol + rtol·|ref| comparison that prints the first mismatches.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ops_test {

template <typename T>
std::vector<T> random_vec(size_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = T(u(rng));
  return v;
}

// Values away from 0 (|x| ∈ [0.1, 1]), random sign: ReLU has no kink within a finite-difference step.
inline std::vector<double> away_from_zero(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.1, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = (rng() & 1) ? u(rng) : -u(rng);
  return v;
}

// Distinct values at least 0.01 apart in random order: max pooling has no ties within a step.
inline std::vector<double> distinct_values(size_t n, uint32_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01 * double(i) - 0.005 * double(n);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The outcome of a central-difference check: how many elements disagree (a NaN or Inf on either side
// always counts: every comparison with NaN is false, so a plain "error > tol" test would let it through).
struct GradientReport {
  size_t bad = 0, worst_i = 0;
  double worst = 0;                 // largest relative error; +inf when some value is not finite
  std::vector<std::string> first;   // the first few mismatches, for the failure message
  bool ok() const { return bad == 0; }
};

// Compares `analytic` = ∂loss/∂x with central differences of step h for every element of x (x is restored),
// without reporting: |analytic − numeric| ≤ tol · max(1, |numeric|), both finite.
inline GradientReport compare_gradient(std::vector<double>& x, const std::vector<double>& analytic,
                                       const std::function<double()>& loss, double h = 1e-5, double tol = 1e-6) {
  GradientReport r;
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double lp = loss();
    x[i] = keep - h;
    const double lm = loss();
    x[i] = keep;
    const double numeric = (lp - lm) / (2 * h);
    const double a = i < analytic.size() ? analytic[i] : std::nan("");
    const bool finite = std::isfinite(a) && std::isfinite(numeric);
    const double err = finite ? std::abs(a - numeric) / std::max(1.0, std::abs(numeric)) : HUGE_VAL;
    if (err > r.worst) r.worst = err, r.worst_i = i;
    if (!(err <= tol)) {
      if (r.first.size() < 5)
        r.first.push_back("[" + std::to_string(i) + "]: analytic " + std::to_string(a) + " numeric " +
                          std::to_string(numeric) + (finite ? "" : " (not finite)"));
      ++r.bad;
    }
  }
  return r;
}

// Checks `analytic` = ∂loss/∂x for every element of x by central differences with step h; x is restored.
// Passes when |analytic − numeric| ≤ tol · max(1, |numeric|) everywhere, both sides finite.
inline void expect_gradient(const std::string& what, std::vector<double>& x, const std::vector<double>& analytic,
                            const std::function<double()>& loss, double h = 1e-5, double tol = 1e-6) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const GradientReport r = compare_gradient(x, analytic, loss, h, tol);
  for (const std::string& m : r.first) ADD_FAILURE() << what << m;
  EXPECT_EQ(r.bad, 0u) << what << ": worst relative error " << r.worst << " at " << r.worst_i << " (" << r.bad
                       << " of " << x.size() << " bad, NaN/Inf included)";
}

// |got − ref| ≤ atol + rtol·|ref| element-wise; reports the first few mismatches and the count.
template <typename T, typename U>
void expect_close(const std::string& what, const std::vector<T>& got, const std::vector<U>& ref, double atol,
                  double rtol) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    if (!(std::abs(g - r) <= atol + rtol * std::abs(r))) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: got " << g << " want " << r;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " outside atol " << atol << " + rtol "
                     << rtol << "·|ref|";
}

}  // namespace ops_test
