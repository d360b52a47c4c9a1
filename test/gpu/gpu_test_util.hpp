// test/gpu/gpu_test_util.hpp — shared by the GPU parity tests: the skip rule, seeded inputs, and the
// atol + rtol·|ref| comparison that prints the first mismatches.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/ops.hpp"
#include "hetrain/error.hpp"

// Without a GPU (or in a CPU-only build) a GPU test is reported as skipped, never as passed. Where a GPU
// must be there (HETRAIN_REQUIRE_GPU=1, as scripts/gpu-check.sh sets it on a GPU machine), it FAILS instead:
// a machine whose GPU the process cannot see must not pass the GPU check with everything skipped.
#define HT_REQUIRE_GPU()                                                                             \
  do {                                                                                               \
    if (::hetrain::cuda_device_count() == 0) {                                                       \
      if (::gpu_test::gpu_required()) FAIL() << "HETRAIN_REQUIRE_GPU=1 but " << ::hetrain::cuda_status(); \
      GTEST_SKIP() << ::hetrain::cuda_status();                                                      \
    }                                                                                                \
  } while (0)

namespace gpu_test {

inline bool gpu_required() {
  const char* v = std::getenv("HETRAIN_REQUIRE_GPU");
  return v && *v && std::string(v) != "0";
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

inline std::vector<int32_t> random_labels(size_t n, int K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(0, K - 1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// |got − ref| ≤ atol + rtol·|ref| element-wise (NaN matches only NaN); reports the first 5 mismatches.
template <typename T, typename U>
void expect_close(const std::string& what, const std::vector<T>& got, const std::vector<U>& ref, double atol,
                  double rtol) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    const bool ok = (std::isnan(g) && std::isnan(r)) || std::abs(g - r) <= atol + rtol * std::abs(r);
    if (!std::isnan(g) && !std::isnan(r)) worst = std::max(worst, std::abs(g - r));
    if (!ok && bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: got " << g << ", reference " << r;
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " elements outside " << atol << " + "
                     << rtol << "·|ref| (largest difference " << worst << ")";
}

}  // namespace gpu_test
