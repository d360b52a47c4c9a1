// test/nn/test_util.hpp — small helpers shared by the nn tests.
#pragma once

#include <cstdint>
#include <random>

#include <gtest/gtest.h>

#include <string>

#include "hetrain/nn.hpp"
#include "hetrain/tensor.hpp"

namespace hetrain::nn::test {

// Deterministic pseudo-random fill in [lo, hi) (test data only: bit-portability is not needed here).
inline void fill_uniform(const Tensor& t, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < t.numel(); ++i)
    t[i] = lo + (hi - lo) * static_cast<float>(static_cast<double>(gen() >> 11) * 0x1.0p-53);
}

// The declared shape of the parameter `name` (a test failure, and an empty shape, when there is none).
inline Shape shape_of(const ParamBuffer& pb, const std::string& name) {
  const int i = pb.find(name);
  EXPECT_GE(i, 0) << "missing parameter " << name;
  return i >= 0 ? pb.specs()[size_t(i)].shape : Shape{};
}

}  // namespace hetrain::nn::test
