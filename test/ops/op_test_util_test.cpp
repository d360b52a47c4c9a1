// The helpers of the op tests must be able to fail: a gradient of NaN or Inf (analytic or numeric) is a
// mismatch, not a pass — every comparison with NaN is false, so "error > tol" alone never fires on it.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <limits>
#include <vector>

#include "op_test_util.hpp"

using namespace ops_test;

namespace {
// loss(x) = Σ c_i x_i², so ∂loss/∂x_i = 2 c_i x_i.
struct Quadratic {
  std::vector<double> x = random_vec<double>(6, 1), c = random_vec<double>(6, 2);
  double operator()() const {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += c[i] * x[i] * x[i];
    return s;
  }
  std::vector<double> grad() const {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) g[i] = 2 * c[i] * x[i];
    return g;
  }
};
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// Runs `check` with gtest's failure reports captured (they do not fail this test) and returns how many of
// them mention `needle`.
int failures_mentioning(const std::function<void()>& check, const std::string& needle) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter capture(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  int n = 0;
  for (int i = 0; i < results.size(); ++i)
    n += results.GetTestPartResult(i).failed() &&
         std::string(results.GetTestPartResult(i).message()).find(needle) != std::string::npos;
  return n;
}
}  // namespace

TEST(GradientHelper, RightGradientPasses) {
  Quadratic q;
  const GradientReport r = compare_gradient(q.x, q.grad(), [&] { return q(); });
  EXPECT_TRUE(r.ok()) << r.worst;
  expect_gradient("quadratic", q.x, q.grad(), [&] { return q(); });
}

TEST(GradientHelper, AllNaNAnalyticGradientFails) {
  Quadratic q;
  const std::vector<double> nan(q.x.size(), kNaN);
  const GradientReport r = compare_gradient(q.x, nan, [&] { return q(); });
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.bad, q.x.size());
  EXPECT_GE(failures_mentioning([&] { expect_gradient("nan", q.x, nan, [&] { return q(); }); }, "not finite"), 1);
}

TEST(GradientHelper, OneInfOrNaNAmongRightValuesFails) {
  for (const double v : {kNaN, kInf, -kInf}) {
    Quadratic q;
    std::vector<double> g = q.grad();
    g[3] = v;
    const GradientReport r = compare_gradient(q.x, g, [&] { return q(); });
    EXPECT_EQ(r.bad, 1u) << v;
    EXPECT_EQ(r.worst_i, 3u) << v;
  }
}

TEST(GradientHelper, NaNLossFails) {  // the numeric side is NaN: nothing was checked
  Quadratic q;
  const GradientReport r = compare_gradient(q.x, q.grad(), [&] { return kNaN; });
  EXPECT_EQ(r.bad, q.x.size());
  EXPECT_GE(failures_mentioning([&] { expect_gradient("nan loss", q.x, q.grad(), [&] { return kNaN; }); }, "not finite"),
            1);
}

TEST(GradientHelper, WrongGradientFails) {
  Quadratic q;
  std::vector<double> g = q.grad();
  g[0] += 1e-3;
  EXPECT_EQ(compare_gradient(q.x, g, [&] { return q(); }).bad, 1u);
}

TEST(CloseHelper, NaNFails) {
  const std::vector<float> got = {1.f, std::nanf(""), 3.f};
  const std::vector<double> ref = {1.0, 2.0, 3.0};
  EXPECT_GE(failures_mentioning([&] { expect_close("nan", got, ref, 1e-3, 1e-3); }, "got nan"), 1);
  EXPECT_GE(failures_mentioning([&] { expect_close("nan ref", ref, got, 1e-3, 1e-3); }, "reference nan"), 1);
  EXPECT_EQ(failures_mentioning([&] { expect_close("nan both", got, got, 1e-3, 1e-3); }, ""), 0)
      << "a NaN matches a NaN (a kernel's NaN where the reference has one is right)";
}
