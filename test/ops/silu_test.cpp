// ops/silu: SiLU and sigmoid — values at 0 and at large ±x (saturation without NaN), finite-difference
// gradients in double, in-place use (y over x, dx over dy), the Tensor-level entry points and their errors;
// and the dispatch layer itself: a table without a CUDA slot refuses a CUDA call, naming the op.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "hetrain/cuda.hpp"
#include "hetrain/error.hpp"
#include "tensor_op_test_util.hpp"
#include "ops/silu/silu.hpp"

using namespace hetrain;
using namespace hetrain::ops;
using namespace ops_test;

namespace {
}  // namespace

// silu(0) = 0, σ(0) = 1/2, silu'(0) = σ(0) = 1/2, σ'(0) = 1/4 — exact in binary, for float and double.
template <typename T>
void check_at_zero() {
  const T x = 0, dy = 1;
  T y, s, dx, ds;
  silu_forward_cpu(&y, &x, 1);
  sigmoid_forward_cpu(&s, &x, 1);
  silu_backward_cpu(&dx, &dy, &x, 1);
  sigmoid_backward_cpu(&ds, &dy, &s, 1);
  EXPECT_EQ(y, T(0));
  EXPECT_EQ(s, T(0.5));
  EXPECT_EQ(dx, T(0.5));
  EXPECT_EQ(ds, T(0.25));
}
TEST(Silu, ValuesAtZero) {
  check_at_zero<float>();
  check_at_zero<double>();
}

// Far out, e^−x overflows or vanishes: σ → 0 or 1, silu → 0 or x, both derivatives → 0 or 1 (silu) and
// 0 (σ), and nothing becomes NaN (e.g. no ∞·0).
template <typename T>
void check_saturation() {
  const std::vector<T> x = {T(-1e30), T(-1e4), T(-800), T(-100), T(-40), T(40), T(100), T(800), T(1e4), T(1e30)};
  const size_t n = x.size();
  const std::vector<T> dy(n, T(1));
  std::vector<T> y(n), s(n), dx(n), ds(n);
  silu_forward_cpu(y.data(), x.data(), int64_t(n));
  sigmoid_forward_cpu(s.data(), x.data(), int64_t(n));
  silu_backward_cpu(dx.data(), dy.data(), x.data(), int64_t(n));
  sigmoid_backward_cpu(ds.data(), dy.data(), s.data(), int64_t(n));
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE("x=" + std::to_string(double(x[i])));
    const bool pos = x[i] > 0;
    ASSERT_TRUE(std::isfinite(y[i]) && std::isfinite(s[i]) && std::isfinite(dx[i]) && std::isfinite(ds[i]));
    EXPECT_NEAR(double(s[i]), pos ? 1.0 : 0.0, 1e-15);
    EXPECT_NEAR(double(ds[i]), 0.0, 1e-15);
    if (pos) {
      EXPECT_EQ(y[i], x[i]);
    } else {
      EXPECT_NEAR(double(y[i]), 0.0, 1e-15);
    }
    EXPECT_NEAR(double(dx[i]), pos ? 1.0 : 0.0, 1e-13);
  }
}
TEST(Silu, SaturatesAtLargeMagnitudes) {
  check_saturation<float>();
  check_saturation<double>();
}

// The float path computes e^x with its own vectorisable routine (ops/common/fast_exp.hpp): within 4e-7 of the
// double result, relative, for x ∈ [−90, 90] (the ends included: σ saturates there).
TEST(Silu, FloatMatchesDoubleAcrossTheRange) {
  const int n = 180001;
  std::vector<float> x(n), y(n), s(n);
  for (int i = 0; i < n; ++i) x[size_t(i)] = -90.0f + 0.001f * float(i);
  silu_forward_cpu(y.data(), x.data(), n);
  sigmoid_forward_cpu(s.data(), x.data(), n);
  double worst_y = 0, worst_s = 0;
  for (int i = 0; i < n; ++i) {
    const double xd = x[size_t(i)], sd = 1.0 / (1.0 + std::exp(-xd)), yd = xd * sd;
    if (std::abs(yd) > 1e-30) worst_y = std::max(worst_y, std::abs(y[size_t(i)] - yd) / std::abs(yd));
    if (sd > 1e-30) worst_s = std::max(worst_s, std::abs(s[size_t(i)] - sd) / sd);
  }
  EXPECT_LT(worst_y, 4e-7);
  EXPECT_LT(worst_s, 4e-7);
}

// L = Σ f(x) ⊙ G in double, x ∈ [−6, 6]: dL/dx by the backward vs central differences.
TEST(SiluGrad, FiniteDifferences) {
  const size_t n = 400;
  auto x = random_vec<double>(n, 1, -6.0, 6.0);
  const auto G = random_vec<double>(n, 2);
  std::vector<double> y(n), dx(n);
  auto silu_loss = [&] {
    silu_forward_cpu(y.data(), x.data(), int64_t(n));
    return dot(y, G);
  };
  silu_backward_cpu(dx.data(), G.data(), x.data(), int64_t(n));
  expect_gradient("silu dx", x, dx, silu_loss);
  expect_sharp(x, dx, silu_loss);

  auto sigmoid_loss = [&] {
    sigmoid_forward_cpu(y.data(), x.data(), int64_t(n));
    return dot(y, G);
  };
  sigmoid_loss();  // the backward takes the saved output
  sigmoid_backward_cpu(dx.data(), G.data(), y.data(), int64_t(n));
  expect_gradient("sigmoid dx", x, dx, sigmoid_loss);
  expect_sharp(x, dx, sigmoid_loss);
}

// Through the Tensor-level entry points: y may be x and dx may be dy, with the same bits as separate buffers.
// 100009 elements take the OpenMP path.
TEST(Silu, InPlaceMatchesSeparateBuffers) {
  const Shape shape = {7, 1, 1, 14287};
  const auto xv = random_vec<float>(size_t(shape_numel(shape)), 3, -8.0, 8.0);
  const auto dyv = random_vec<float>(xv.size(), 4);
  Tensor x = tensor_of(shape, xv), dy = tensor_of(shape, dyv);

  Tensor y(shape), dx(shape);
  silu_forward(y, x);
  silu_backward(dx, dy, x);
  std::vector<float> y_ref(xv.size()), dx_ref(xv.size());
  silu_forward_cpu(y_ref.data(), xv.data(), int64_t(xv.size()));
  silu_backward_cpu(dx_ref.data(), dyv.data(), xv.data(), int64_t(xv.size()));
  EXPECT_EQ(values(y), y_ref);
  EXPECT_EQ(values(dx), dx_ref);
  Tensor g = dy.clone();
  silu_backward(g, g, x);
  EXPECT_EQ(values(g), dx_ref) << "silu_backward with dx = dy";
  Tensor xs = x.clone();
  silu_forward(xs, xs);
  EXPECT_EQ(values(xs), y_ref) << "silu_forward with y = x";

  Tensor s(shape), ds(shape);
  sigmoid_forward(s, x);
  sigmoid_backward(ds, dy, s);
  Tensor s2 = x.clone(), g2 = dy.clone();
  sigmoid_forward(s2, s2);
  sigmoid_backward(g2, g2, s2);
  EXPECT_EQ(values(s2), values(s)) << "sigmoid_forward with y = x";
  EXPECT_EQ(values(g2), values(ds)) << "sigmoid_backward with dx = dy";
}

TEST(Silu, EmptyBatch) {
  Tensor x({0, 16, 4, 4});
  EXPECT_NO_THROW(silu_forward(x, x));
  EXPECT_NO_THROW(silu_backward(x, x, x));
  EXPECT_NO_THROW(sigmoid_forward(x, x));
  EXPECT_NO_THROW(sigmoid_backward(x, x, x));
}

TEST(Silu, BadShapesNameTheOp) {
  Tensor x({2, 3}), other({3, 2});
  expect_error("silu_forward", "output is [3, 2], expected [2, 3]", [&] { silu_forward(other, x); });
  expect_error("silu_backward", "saved input is [3, 2], expected [2, 3]", [&] { silu_backward(x, x, other); });
  expect_error("sigmoid_forward", "output is [3, 2], expected [2, 3]", [&] { sigmoid_forward(other, x); });
  expect_error("sigmoid_backward", "saved output is [3, 2], expected [2, 3]", [&] { sigmoid_backward(x, x, other); });
}

TEST(Silu, RegisteredForEveryBuiltDevice) {
  for (const auto* table : {&silu_op.forward_impl, &sigmoid_op.forward_impl}) {
    EXPECT_TRUE(table->has(Device::CPU)) << table->name();
    EXPECT_EQ(table->has(Device::CUDA), cuda_built()) << table->name();
  }
  for (const auto* table : {&silu_op.backward_impl, &sigmoid_op.backward_impl}) {
    EXPECT_TRUE(table->has(Device::CPU)) << table->name();
    EXPECT_EQ(table->has(Device::CUDA), cuda_built()) << table->name();
  }
}

// A table whose CUDA slot is empty — what every op is in a build without CUDA — refuses a CUDA call with
// an error naming the op: "built without CUDA" in such a build, "no cuda implementation" in a CUDA build.
// (A real CUDA tensor cannot be made without a GPU, so the table is called directly.)
TEST(OpDispatch, EmptyCudaSlotThrowsNamingTheOp) {
  Dispatch<UnaryFn> table("test_cpu_only_op");
  EXPECT_FALSE(table.has(Device::CPU));
  expect_error("test_cpu_only_op", "no cpu implementation", [&] { table.on(Device::CPU); });
  table.define(Device::CPU, silu_forward_cpu<float>);
  EXPECT_TRUE(table.has(Device::CPU));
  EXPECT_FALSE(table.has(Device::CUDA));
  EXPECT_EQ(table.on(Device::CPU), &silu_forward_cpu<float>);
  expect_error("test_cpu_only_op", cuda_built() ? "no cuda implementation" : "built without CUDA",
               [&] { table.on(Device::CUDA); });
}

// The whole path in a build without CUDA: an op given a CUDA tensor fails before touching its memory. The
// tensors are views of a host buffer labelled CUDA, which only such a build may be handed safely.
TEST(OpDispatch, CudaTensorInBuildWithoutCudaFails) {
  if (cuda_built()) GTEST_SKIP() << "this build has CUDA: the op would run its kernel";
  std::vector<float> buffer(6);
  Tensor x = Tensor::view_of(buffer.data(), {2, 3}, Device::CUDA);
  expect_error("silu_forward", "built without CUDA", [&] { silu_forward(x, x); });
  expect_error("sigmoid_backward", "built without CUDA", [&] { sigmoid_backward(x, x, x); });
}
