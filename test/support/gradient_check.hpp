// test/support/gradient_check.hpp — the one finite-difference gradient check of the test groups. Both of
// its forms move one value at a time and take central differences of the loss (central_difference):
//  - compare_gradient / expect_gradient: every element of a double vector, the plain central difference,
//    strict (the op tests, in double: exact but for rounding);
//  - check_points: chosen float values of a layer or model, the central difference improved by Richardson
//    extrapolation, and a point where the loss has a kink within ±2h skipped and counted (the nn tests; the
//    method: test/nn/grad_check_test.cpp's opening comment).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace test_support {

// loss() with x moved by delta; x is restored.
template <typename T>
double loss_moved(T& x, double delta, const std::function<double()>& loss) {
  const T keep = x;
  x = T(keep + delta);
  const double l = loss();
  x = keep;
  return l;
}

// (loss(x + h) − loss(x − h)) / 2h; x is restored.
template <typename T>
double central_difference(T& x, double h, const std::function<double()>& loss) {
  return (loss_moved(x, h, loss) - loss_moved(x, -h, loss)) / (2 * h);
}

// The outcome of a check of every element: how many disagree (a NaN or Inf on either side always counts:
// every comparison with NaN is false, so a plain "error > tol" test would let it through).
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
    const double numeric = central_difference(x[i], h, loss);
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

// The same as a test: fails naming the worst element and the first mismatches.
inline void expect_gradient(const std::string& what, std::vector<double>& x, const std::vector<double>& analytic,
                            const std::function<double()>& loss, double h = 1e-5, double tol = 1e-6) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  const GradientReport r = compare_gradient(x, analytic, loss, h, tol);
  for (const std::string& m : r.first) ADD_FAILURE() << what << m;
  EXPECT_EQ(r.bad, 0u) << what << ": worst relative error " << r.worst << " at " << r.worst_i << " (" << r.bad
                       << " of " << x.size() << " bad, NaN/Inf included)";
}

// One float value of a layer or model and the analytic derivative of the loss in it.
struct Point {
  std::string what;
  float* value;
  double analytic;
};

struct CheckResult {
  int checked = 0, skipped = 0, bad = 0, nonzero = 0;
  std::vector<std::string> bad_points;  // "what: analytic … vs numeric …"
};

// With report_each, every mismatch is a test failure; without, they are only listed in the result.
inline CheckResult check_points(const std::vector<Point>& points, const std::function<double()>& loss, float h,
                                double atol, double rtol, bool report_each = true) {
  CheckResult res;
  for (const Point& pt : points) {
    float& x = *pt.value;
    const double l0 = loss(), lp = loss_moved(x, h, loss), lm = loss_moved(x, -h, loss);
    const double d1 = (lp - lm) / (2.0 * h), d2 = central_difference(x, 2 * h, loss);
    const double fp = (lp - l0) / h, fm = (l0 - lm) / h;
    // Smooth: d2 − d1 = O(h²) and fp − fm = O(h). A kink within ±2h makes them differ by O(1); a kink right
    // at the point leaves d1 = d2 (both average the two slopes) but splits fp and fm.
    if (std::fabs(d2 - d1) > atol + 0.05 * std::fabs(d1) ||
        std::fabs(fp - fm) > 2 * atol + 0.1 * std::max(std::fabs(fp), std::fabs(fm))) {
      ++res.skipped;
      continue;
    }
    const double fd = (4.0 * d1 - d2) / 3.0;  // Richardson: error O(h⁴) instead of O(h²)
    ++res.checked;
    res.nonzero += std::fabs(pt.analytic) > 2 * atol;
    if (std::fabs(fd - pt.analytic) > atol + rtol * std::fabs(pt.analytic)) {
      ++res.bad;
      res.bad_points.push_back(pt.what + ": analytic " + std::to_string(pt.analytic) + " vs numeric " +
                               std::to_string(fd));
      if (report_each) ADD_FAILURE() << res.bad_points.back();
    }
  }
  return res;
}

}  // namespace test_support
