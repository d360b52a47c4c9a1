// test/nn/test_util.hpp — small helpers shared by the nn tests.
#pragma once

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include <string>

#include "hetrain/nn.hpp"
#include "hetrain/tensor.hpp"
#include "../support/checks.hpp"

namespace hetrain::nn::test {

// t's values uniform in [lo, hi), from the shared generator (test/support/checks.hpp).
inline void fill_uniform(const Tensor& t, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  const std::vector<float> v = test_support::random_vec<float>(size_t(t.numel()), seed, lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = v[size_t(i)];
}

// The declared shape of the parameter `name` (a test failure, and an empty shape, when there is none).
inline Shape shape_of(const ParamBuffer& pb, const std::string& name) {
  const int i = pb.find(name);
  EXPECT_GE(i, 0) << "missing parameter " << name;
  return i >= 0 ? pb.specs()[size_t(i)].shape : Shape{};
}

}  // namespace hetrain::nn::test
