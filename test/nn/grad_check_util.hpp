// test/nn/grad_check_util.hpp — the points of a layer or model that the nn gradient tests check with the
// shared finite-difference check (test/support/gradient_check.hpp, the method: test/nn/grad_check_test.cpp's
// opening comment).
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
#include "../support/gradient_check.hpp"

namespace hetrain::nn::test {

using test_support::check_points;
using test_support::CheckResult;
using test_support::Point;

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
