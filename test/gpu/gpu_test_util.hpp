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
#include "../support/checks.hpp"

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
  return test_support::random_vec<float>(n, seed, lo, hi);
}
using test_support::expect_close;
using test_support::random_labels;

}  // namespace gpu_test
