// test/gpu/low_precision_ops_test.cpp — BF16 and FP16 convolutions (cuda::CudnnConv2d) and dense layers
// (cuda::linear_*) against the float operands' exact result (ops::cpu::conv2d_*_naive, ops::cpu::linear_* in double).
//
// Tolerance, per element, with u the unit roundoff (2^-8 for bfloat16, 2^-11 for IEEE half):
//   |got − ref| ≤ u·(2·|y| + 8·q) + 1e-4·√k + 1e-4·|ref|
// where y is the layer's own sum (ref without the bias or the gradient's initial value) and
// q = √(Σ (a_i·b_i)²) over the k products of that sum. Why:
//   - Each operand is rounded to 16 bits (relative error ≤ u), so a product errs by ≤ 2u·|a_i·b_i|. These errors
//     are independent with zero mean: their sum has a standard deviation ≤ u·√(2/3)·q, and 8·u·q is ~10 of
//     those (a bound over the few thousand elements of a case, even for short sums; the worst case 2u·Σ|a_i·b_i|
//     would be ~√k times looser and miss the bugs below).
//   - A convolution's result is rounded to 16 bits once more (≤ u·|y|); the second u·|y| leaves room for
//     rounding inside the library (a split reduction, a Winograd transform). cuBLAS writes float: there it is
//     pure slack.
//   - 1e-4·√k + 1e-4·|ref|: the FP32 tests' tolerance (test/gpu/conv_cudnn_test.cpp, linear_test.cpp) for the
//     FP32 accumulation of k products of values in [-1, 1].
// With inputs in [-1, 1] this is a few 2^-8 (bf16) or 2^-11 (fp16) of the output's scale. The gradients start
// non-zero — dweight at 8, dbias at -0.25, din at 7 — and every one of them is far outside the tolerance:
// an overwritten dweight or an accumulated din fails, and so does a wrong cast (the other 16-bit format, a
// missing cast back). A second check makes sure the 16-bit path ran at all: the forward's RMS error must be at
// least u/20 of the output's RMS (16-bit rounding leaves about u/3; FP32 arithmetic ~2^-24·√k, far below).
// An emulation of the scheme on these very shapes (operands and convolution outputs rounded in float) gave
// worst errors of 0.17–0.27 of this tolerance, an RMS error of ~0.7u of the output's, and a lost dweight
// accumulation 7–500× the tolerance. Each case prints its worst error as a fraction of the tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "gpu_test_util.hpp"

using namespace hetrain;

namespace {
double unit_roundoff(Precision p) { return std::ldexp(1.0, p == Precision::BF16 ? -8 : -11); }

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
std::vector<double> squares(const std::vector<float>& v) {
  std::vector<double> s(v.size());
  for (size_t i = 0; i < v.size(); ++i) s[i] = double(v[i]) * double(v[i]);
  return s;
}

// One output of a 16-bit layer against its exact value: ref = init + y; q as in the file's header; k the length
// of the sums. Reports the first mismatches, the worst |error| / tolerance, and returns the RMS of the error
// and of y.
struct Rms {
  double err = 0, y = 0;
};
Rms expect_within(const std::string& what, const std::vector<float>& got, const std::vector<double>& init,
                  const std::vector<double>& y, const std::vector<double>& q2, double k, Precision p) {
  EXPECT_EQ(got.size(), y.size()) << what;
  const double u = unit_roundoff(p);
  size_t bad = 0;
  double worst = 0, se = 0, sy = 0, max_abs = 0, max_rel = 0;
  for (size_t i = 0; i < y.size() && i < got.size(); ++i) {
    const double ref = init[i] + y[i];
    const double tol = u * (2 * std::abs(y[i]) + 8 * std::sqrt(q2[i])) + 1e-4 * std::sqrt(k) + 1e-4 * std::abs(ref);
    const double err = std::abs(double(got[i]) - ref);
    const bool ok = err <= tol;  // false for NaN
    if (!ok && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", reference " << ref << " (tolerance " << tol << ")";
    worst = std::max(worst, ok ? err / tol : 1e9);
    if (std::isfinite(err)) {
      max_abs = std::max(max_abs, err);
      if (ref != 0) max_rel = std::max(max_rel, err / std::abs(ref));
    }
    se += (double(got[i]) - ref) * (double(got[i]) - ref);
    sy += y[i] * y[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << y.size() << " elements outside the tolerance";
  std::cout << "  " << what << ": worst error " << worst << " of the tolerance\n";
  gpu_test::record_parity(what, y.size(), max_abs, max_rel, worst, bad == 0 && got.size() == y.size());
  const double n = double(std::max<size_t>(y.size(), 1));
  return {std::sqrt(se / n), std::sqrt(sy / n)};
}

// Whether the 16-bit path ran shows in the forward's error, but only over enough outputs: the 3 outputs of
// a one-sample linear case (15 products, seed 122) are off by only 1/28 of u·rms(y) at bf16, with the same
// operands and FP32 sums on any device, so the rule below would fail there every time.
void expect_16bit_ran(const Rms& r, size_t outputs, Precision p) {
  if (outputs < 64) return;
  EXPECT_GE(r.err, unit_roundoff(p) / 20 * r.y) << "the forward is as exact as FP32: did the 16-bit path run?";
}

Conv2dGeom geom(int N, int C, int H, int W, int K, int R, int S, int stride, int pad) {
  Conv2dGeom g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.K = K, g.R = R, g.S = S, g.stride = stride, g.pad = pad;
  return g;
}

void check_conv(const Conv2dGeom& g, Precision p, uint32_t seed) {
  SCOPED_TRACE(std::string(precision_name(p)) + " N" + std::to_string(g.N) + " C" + std::to_string(g.C) + " " +
               std::to_string(g.H) + "x" + std::to_string(g.W) + " K" + std::to_string(g.K) + " " +
               std::to_string(g.R) + "x" + std::to_string(g.S) + " stride " + std::to_string(g.stride) + " pad " +
               std::to_string(g.pad));
  std::cout << " conv " << precision_name(p) << " C" << g.C << " K" << g.K << " " << g.R << "x" << g.S << " stride "
            << g.stride << "\n";
  const size_t nin = size_t(g.N) * g.C * g.H * g.W, nw = size_t(g.K) * g.C * g.R * g.S;
  const size_t nout = size_t(g.N) * g.K * g.P() * g.Q();
  const auto in = gpu_test::random_floats(nin, seed), w = gpu_test::random_floats(nw, seed + 1);
  const auto bias = gpu_test::random_floats(g.K, seed + 2), dout = gpu_test::random_floats(nout, seed + 3);

  // Exact sums of the float operands, and the sums of squared products (q²), in double.
  const auto in_d = to_double(in), w_d = to_double(w), dout_d = to_double(dout);
  std::vector<double> y(nout), dx(nin, 0.0), dw(nw, 0.0), db(g.K, 0.0);
  ops::cpu::conv2d_forward_naive<double>(y.data(), in_d.data(), w_d.data(), nullptr, g);
  ops::cpu::conv2d_backward_naive<double>(dx.data(), dw.data(), db.data(), dout_d.data(), in_d.data(), w_d.data(), g);
  const auto in2 = squares(in), w2 = squares(w), dout2 = squares(dout);
  std::vector<double> y_q2(nout), dx_q2(nin, 0.0), dw_q2(nw, 0.0), zero_q2(g.K, 0.0);
  ops::cpu::conv2d_forward_naive<double>(y_q2.data(), in2.data(), w2.data(), nullptr, g);
  ops::cpu::conv2d_backward_naive<double>(dx_q2.data(), dw_q2.data(), nullptr, dout2.data(), in2.data(), w2.data(), g);

  cuda::DeviceBuffer<float> d_in(nin), d_w(nw), d_b(g.K), d_out(nout), d_dout(nout), d_din(nin), d_dw(nw), d_db(g.K);
  d_in.upload(in), d_w.upload(w), d_b.upload(bias), d_dout.upload(dout);
  d_out.upload(std::vector<float>(nout, 3.0f));  // overwritten
  d_din.upload(std::vector<float>(nin, 7.0f));   // overwritten
  d_dw.upload(std::vector<float>(nw, 8.0f));     // accumulated
  d_db.upload(std::vector<float>(g.K, -0.25f));  // accumulated
  cuda::CudnnConvOptions opt;
  opt.precision = p;
  cuda::CudnnConv2d conv(g, opt);
  EXPECT_GE(cuda::low_precision_scratch_bytes(), 2 * (nin + nout + nw));  // x, y and w in 16 bits
  CudaStream s = cuda::stream_create();
  conv.forward(d_out.data(), d_in.data(), d_w.data(), d_b.data(), s);
  conv.backward(d_din.data(), d_dw.data(), d_db.data(), d_dout.data(), d_in.data(), d_w.data(), s);
  cuda::stream_synchronize(s);
  cuda::stream_destroy(s);
  std::cout << "  algorithms " << conv.algorithms() << ", workspace " << conv.workspace_bytes() << " bytes\n";

  const double k_out = double(g.C) * g.R * g.S, k_in = double(g.K) * g.R * g.S, k_w = double(g.N) * g.P() * g.Q();
  std::vector<double> bias_init(nout);  // the bias broadcast over [N, K, P, Q]
  const size_t pq = size_t(g.P()) * g.Q();
  for (size_t i = 0; i < nout; ++i) bias_init[i] = bias[(i / pq) % size_t(g.K)];
  const Rms fwd = expect_within("out", d_out.download(), bias_init, y, y_q2, k_out, p);
  expect_16bit_ran(fwd, nout, p);
  expect_within("din", d_din.download(), std::vector<double>(nin, 0.0), dx, dx_q2, k_in, p);
  expect_within("dweight", d_dw.download(), std::vector<double>(nw, 8.0), dw, dw_q2, k_w, p);
  // dbias is computed in FP32 from the float dout: the FP32 test's tolerance (no 16-bit term).
  std::vector<double> db_ref(g.K);
  for (int k = 0; k < g.K; ++k) db_ref[k] = -0.25 + db[k];
  gpu_test::expect_close("dbias", d_db.download(), db_ref, 1e-3, 1e-4);
}

void check_linear(int N, int I, int O, Precision p, uint32_t seed) {
  SCOPED_TRACE(std::string(precision_name(p)) + " N" + std::to_string(N) + " I" + std::to_string(I) + " O" +
               std::to_string(O));
  std::cout << " linear " << precision_name(p) << " N" << N << " I" << I << " O" << O << "\n";
  const size_t nin = size_t(N) * I, nw = size_t(O) * I, nout = size_t(N) * O;
  const auto in = gpu_test::random_floats(nin, seed), w = gpu_test::random_floats(nw, seed + 1);
  const auto b = gpu_test::random_floats(O, seed + 2), dout = gpu_test::random_floats(nout, seed + 3);
  const auto in_d = to_double(in), w_d = to_double(w), dout_d = to_double(dout);
  std::vector<double> y(nout), dx(nin), dw(nw, 0.0), db(O, 0.0);
  ops::cpu::linear_forward<double>(y.data(), in_d.data(), w_d.data(), nullptr, N, I, O);
  ops::cpu::linear_backward<double>(dx.data(), dw.data(), db.data(), dout_d.data(), in_d.data(), w_d.data(), N, I, O);
  const auto in2 = squares(in), w2 = squares(w), dout2 = squares(dout);
  std::vector<double> y_q2(nout), dx_q2(nin), dw_q2(nw, 0.0);
  ops::cpu::linear_forward<double>(y_q2.data(), in2.data(), w2.data(), nullptr, N, I, O);
  ops::cpu::linear_backward<double>(dx_q2.data(), dw_q2.data(), nullptr, dout2.data(), in2.data(), w2.data(), N, I, O);

  cuda::DeviceBuffer<float> d_in(nin), d_w(nw), d_b(O), d_out(nout), d_dout(nout), d_din(nin), d_dw(nw), d_db(O);
  d_in.upload(in), d_w.upload(w), d_b.upload(b), d_dout.upload(dout);
  d_out.upload(std::vector<float>(nout, 3.0f));
  d_din.upload(std::vector<float>(nin, 7.0f));
  d_dw.upload(std::vector<float>(nw, 8.0f));
  d_db.upload(std::vector<float>(O, -0.25f));
  CudaStream s = cuda::stream_create();
  cuda::linear_forward(d_out.data(), d_in.data(), d_w.data(), d_b.data(), N, I, O, s, p);
  cuda::linear_backward(d_din.data(), d_dw.data(), d_db.data(), d_dout.data(), d_in.data(), d_w.data(), N, I, O, s, p);
  cuda::stream_synchronize(s);
  cuda::stream_destroy(s);
  EXPECT_GE(cuda::low_precision_scratch_bytes(), 2 * (nin + nw + nout));  // in, weight and dout in 16 bits

  std::vector<double> bias_init(nout);
  for (size_t i = 0; i < nout; ++i) bias_init[i] = b[i % size_t(O)];
  const Rms fwd = expect_within("out", d_out.download(), bias_init, y, y_q2, I, p);
  expect_16bit_ran(fwd, nout, p);
  expect_within("din", d_din.download(), std::vector<double>(nin, 0.0), dx, dx_q2, O, p);
  expect_within("dweight", d_dw.download(), std::vector<double>(nw, 8.0), dw, dw_q2, N, p);
  std::vector<double> db_ref(O);
  for (int o = 0; o < O; ++o) db_ref[o] = -0.25 + db[o];
  gpu_test::expect_close("dbias", d_db.download(), db_ref, 1e-4 * std::sqrt(N), 1e-4);
}
}  // namespace

TEST(CudaLowPrecision, ConvParityBf16) {
  HT_REQUIRE_GPU();
  const Precision p = Precision::BF16;
  check_conv(geom(2, 3, 7, 9, 5, 3, 3, 2, 1), p, 101);     // odd sizes, 3 input channels, 3×3 stride 2
  check_conv(geom(3, 16, 8, 8, 8, 1, 1, 1, 0), p, 102);    // 1×1 (bottleneck)
  check_conv(geom(2, 16, 8, 8, 32, 1, 1, 2, 0), p, 103);   // 1×1 stride 2 (projection shortcut)
  check_conv(geom(4, 32, 14, 14, 32, 3, 3, 1, 1), p, 104); // tensor-core friendly channels
  check_conv(geom(5, 1, 28, 28, 6, 5, 5, 1, 2), p, 105);   // lenet's first layer: one input channel
}

TEST(CudaLowPrecision, ConvParityFp16) {
  HT_REQUIRE_GPU();
  const Precision p = Precision::FP16;
  check_conv(geom(2, 3, 7, 9, 5, 3, 3, 2, 1), p, 111);
  check_conv(geom(3, 16, 8, 8, 8, 1, 1, 1, 0), p, 112);
  check_conv(geom(2, 16, 8, 8, 32, 1, 1, 2, 0), p, 113);
  check_conv(geom(4, 32, 14, 14, 32, 3, 3, 1, 1), p, 114);
  check_conv(geom(5, 1, 28, 28, 6, 5, 5, 1, 2), p, 115);
}

TEST(CudaLowPrecision, LinearParity) {
  HT_REQUIRE_GPU();
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    check_linear(7, 33, 13, p, 121);      // odd sizes
    check_linear(1, 5, 3, p, 122);        // one sample
    check_linear(64, 2048, 1000, p, 123); // ResNet-50's head
  }
}

// The algorithm cache is per precision: the same shape at FP32 and then BF16 searches twice, and each
// convolution keeps its own precision's descriptors (the FP32 one stays exact after the BF16 one ran).
TEST(CudaLowPrecision, CacheKeyHoldsThePrecision) {
  HT_REQUIRE_GPU();
  const Conv2dGeom g = geom(2, 8, 10, 10, 8, 3, 3, 1, 1);
  cuda::CudnnConvOptions fp32, bf16;
  bf16.precision = Precision::BF16;
  const int64_t before = cuda::conv_algorithm_searches();
  cuda::CudnnConv2d a(g, fp32);
  cuda::CudnnConv2d b(g, bf16);
  EXPECT_EQ(cuda::conv_algorithm_searches(), before + 2);
  const size_t n_in = size_t(g.N) * g.C * g.H * g.W, n_w = size_t(g.K) * g.C * g.R * g.S;
  const size_t n_out = size_t(g.N) * g.K * g.P() * g.Q();
  const auto in = gpu_test::random_floats(n_in, 131), w = gpu_test::random_floats(n_w, 132);
  std::vector<float> ref(n_out);
  ops::cpu::conv2d_forward_naive(ref.data(), in.data(), w.data(), static_cast<const float*>(nullptr), g);
  cuda::DeviceBuffer<float> d_in(n_in), d_w(n_w), d_out(n_out);
  d_in.upload(in), d_w.upload(w);
  b.forward(d_out.data(), d_in.data(), d_w.data(), nullptr, nullptr);
  a.forward(d_out.data(), d_in.data(), d_w.data(), nullptr, nullptr);
  gpu_test::expect_close("fp32 out after a bf16 layer", d_out.download(), ref, 1e-4, 1e-4);
}
