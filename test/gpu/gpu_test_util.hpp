// test/gpu/gpu_test_util.hpp — shared by the GPU parity tests: the skip rule, seeded inputs, and the
// atol + rtol·|ref| comparison that prints the first mismatches and records its parity figures.
//
// Parity figures: every gpu_test::expect_close (and record_parity, for tests that compare in their own
// way) writes one line
//   RESULT parity test=Suite.Name what="out" n=4096 max_abs=1.2e-06 max_rel=3.4e-07 tol_frac=0.012 ok=1
// to stdout and, when HETRAIN_GPU_RESULTS names a file, appends it there (scripts/gpu-first-run.sh collects
// them per test). max_abs = max |got − ref|, max_rel = max |got − ref| / |ref| over the elements whose |ref|
// is above 1e-30 of the largest |ref| (finite values only), tol_frac = the largest |got − ref| / (atol +
// rtol·|ref|): 1 is the edge of the tolerance (0 and inf with a zero tolerance: exact or not).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
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

// A test that needs what only a GPU has, such as a measurement of speed. test_gpu_on_host (test/gpu/on_host,
// docs/testing.md) runs the CUDA runtime, our kernels, cuDNN, cuBLAS and one-rank NCCL on the host, so there
// such a test is reported as skipped; test_gpu on a GPU runs it.
#define HT_REQUIRE_REAL_GPU(what)                                                                    \
  do {                                                                                               \
    HT_REQUIRE_GPU();                                                                                \
    if (::gpu_test::cuda_runs_on_host())                                                             \
      GTEST_SKIP() << "needs " << (what) << " on a GPU, which test_gpu_on_host does not emulate";    \
  } while (0)

// Defined only by test/gpu/on_host/runtime.cpp, the CUDA runtime of test_gpu_on_host.
extern "C" int hetrain_cuda_runs_on_host() __attribute__((weak));

namespace gpu_test {

inline bool cuda_runs_on_host() { return hetrain_cuda_runs_on_host != nullptr && hetrain_cuda_runs_on_host() != 0; }

inline bool gpu_required() {
  const char* v = std::getenv("HETRAIN_REQUIRE_GPU");
  return v && *v && std::string(v) != "0";
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return test_support::random_vec<float>(n, seed, lo, hi);
}
using test_support::random_labels;

// The running test's "Suite.Name" (or "-" outside a test).
inline std::string current_test_name() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  return t ? std::string(t->test_suite_name()) + "." + t->name() : std::string("-");
}

// Appends one RESULT line to stdout and to $HETRAIN_GPU_RESULTS (when set).
inline void emit_result(const std::string& line) {
  std::cout << line << std::endl;
  if (const char* path = std::getenv("HETRAIN_GPU_RESULTS"); path && *path) {
    std::ofstream f(path, std::ios::app);
    if (f) f << line << "\n";
  }
}

// One "RESULT parity" line for a comparison of n values (see the file's header); tol_frac < 0: not given.
inline void record_parity(const std::string& what, size_t n, double max_abs, double max_rel, double tol_frac,
                          bool ok) {
  char buf[160];
  std::snprintf(buf, sizeof buf, " n=%zu max_abs=%.3g max_rel=%.3g", n, max_abs, max_rel);
  std::string line = "RESULT parity test=" + current_test_name() + " what=\"" + what + "\"" + buf;
  if (tol_frac >= 0) {
    std::snprintf(buf, sizeof buf, " tol_frac=%.3g", tol_frac);
    line += buf;
  }
  line += ok ? " ok=1" : " ok=0";
  emit_result(line);
}

struct Parity {
  size_t n = 0;
  double max_abs = 0, max_rel = 0, tol_frac = 0;
  bool ok = true;
};
// The figures of the parity line (see the file's header) and whether every element is within atol + rtol·|ref|.
template <typename T, typename U>
Parity parity(const std::vector<T>& got, const std::vector<U>& ref, double atol, double rtol) {
  Parity p;
  p.ok = got.size() == ref.size();
  p.n = std::min(got.size(), ref.size());
  double scale = 0;
  for (size_t i = 0; i < p.n; ++i)
    if (std::isfinite(double(ref[i]))) scale = std::max(scale, std::abs(double(ref[i])));
  for (size_t i = 0; i < p.n; ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    if (std::isnan(g) && std::isnan(r)) continue;
    if (g == r) continue;
    const double d = std::abs(g - r);
    const double tol = atol + rtol * std::abs(r);
    if (!std::isfinite(d)) {
      p.ok = false, p.tol_frac = INFINITY;
      continue;
    }
    p.max_abs = std::max(p.max_abs, d);
    if (std::abs(r) > 1e-30 * scale) p.max_rel = std::max(p.max_rel, d / std::abs(r));
    p.tol_frac = std::max(p.tol_frac, tol > 0 ? d / tol : INFINITY);
    if (d > tol) p.ok = false;
  }
  return p;
}

// test_support::expect_close, plus its parity line.
template <typename T, typename U>
void expect_close(const std::string& what, const std::vector<T>& got, const std::vector<U>& ref, double atol,
                  double rtol) {
  test_support::expect_close(what, got, ref, atol, rtol);
  const Parity p = parity(got, ref, atol, rtol);
  record_parity(what, p.n, p.max_abs, p.max_rel, p.tol_frac, p.ok);
}

// ||a − b|| / ||b|| over all elements (infinite when a value is not finite or the sizes differ).
template <typename T>
double relative_l2(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    diff += d * d, norm += double(b[i]) * double(b[i]);
  }
  if (!std::isfinite(diff) || !std::isfinite(norm)) return INFINITY;
  return norm > 0 ? std::sqrt(diff / norm) : (diff > 0 ? INFINITY : 0.0);
}

// For results that float arithmetic cannot pin elementwise: deep networks at a few samples, where moving
// the input by about one ulp moves ResNet-50's gradients on the CPU itself by more than 1 % in a fifth of
// the elements (docs/testing.md, "Conditioning"). `got` passes when it is elementwise within atol +
// rtol·|ref|, or else when its relative L2 distance from `ref` is at most `factor` times that of `nudged`,
// the CPU's result from the nudged input: as close as any other order of float operations gets. A wrong
// op lands far outside both. Writes the parity line and a "RESULT conditioning" line with both distances.
template <typename T>
void expect_close_as_float_allows(const std::string& what, const std::vector<T>& got, const std::vector<T>& ref,
                                  const std::vector<T>& nudged, double atol, double rtol, double factor = 4) {
  const Parity p = parity(got, ref, atol, rtol);
  record_parity(what, p.n, p.max_abs, p.max_rel, p.tol_frac, p.ok);
  if (p.ok) return;
  const double distance = relative_l2(got, ref), sensitivity = relative_l2(nudged, ref);
  char buf[200];
  std::snprintf(buf, sizeof buf, " rel_l2=%.3g cpu_nudged_rel_l2=%.3g ratio=%.3g", distance, sensitivity,
                sensitivity > 0 ? distance / sensitivity : INFINITY);
  const bool ok = distance <= factor * sensitivity;
  emit_result("RESULT conditioning test=" + current_test_name() + " what=\"" + what + "\"" + buf + (ok ? " ok=1" : " ok=0"));
  EXPECT_LE(distance, factor * sensitivity)
      << what << ": not elementwise within " << atol << " + " << rtol << "·|ref| (worst " << p.tol_frac
      << " of it), and " << distance << " apart in relative L2, more than " << factor << "× the "
      << sensitivity << " that a one-ulp nudge of the input moves the CPU's own result";
}

}  // namespace gpu_test
