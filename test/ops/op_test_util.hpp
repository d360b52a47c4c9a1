// test/ops/op_test_util.hpp — helpers shared by the op tests: inputs shaped for finite differences (away
// from kinks and ties) on top of the shared random values, comparison and gradient check (test/support/).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../support/checks.hpp"
#include "../support/gradient_check.hpp"

namespace ops_test {

using test_support::compare_gradient;
using test_support::expect_close;
using test_support::expect_gradient;
using test_support::GradientReport;
using test_support::random_vec;

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

}  // namespace ops_test
