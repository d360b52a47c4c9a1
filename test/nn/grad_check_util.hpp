// test/nn/grad_check_util.hpp — central finite differences against a layer's or model's analytic gradient,
// shared by the nn gradient tests (the method: test/nn/grad_check_test.cpp's opening comment).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "hetrain/nn.hpp"
#include "hetrain/tensor.hpp"

namespace hetrain::nn::test {

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
inline CheckResult check_points(const std::vector<Point>& points, const std::function<double()>& loss, float h, double atol,
                         double rtol, bool report_each = true) {
  CheckResult res;
  for (const Point& pt : points) {
    const float saved = *pt.value;
    auto at = [&](float delta) {
      *pt.value = saved + delta;
      const double l = loss();
      *pt.value = saved;
      return l;
    };
    const double l0 = loss(), lp = at(h), lm = at(-h);
    const double d1 = (lp - lm) / (2.0 * h), d2 = (at(2 * h) - at(-2 * h)) / (4.0 * h);
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

inline double dot(const Tensor& y, const Tensor& r) {
  double l = 0;
  for (int64_t i = 0; i < y.numel(); ++i) l += double(y[i]) * r[i];
  return l;
}

// `per_tensor` sampled elements of every parameter tensor.
inline std::vector<Point> sample_params(ParamBuffer& pb, int per_tensor, uint64_t seed) {
  std::vector<Point> pts;
  std::mt19937_64 pick(seed);
  for (const ParamSpec& s : pb.specs())
    for (int k = 0; k < per_tensor; ++k) {
      const int64_t j = static_cast<int64_t>(pick() % static_cast<uint64_t>(s.numel()));
      pts.push_back({s.name + "[" + std::to_string(j) + "]", pb.values().data() + s.offset + j,
                     pb.grads()[s.offset + j]});
    }
  return pts;
}

}  // namespace hetrain::nn::test
