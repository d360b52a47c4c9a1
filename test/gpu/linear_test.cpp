// test/gpu/linear_test.cpp — cuda::linear_* (cuBLAS) against ops::cpu::linear_*.
// FP32: atol 1e-4·√k + rtol 1e-4 where k is the length of the sums (I for out, O for din, N for dweight and
// dbias): rounding grows like √k with products of values in [-1, 1]. TF32 (10-bit mantissa products): plus
// 5e-3 of the largest reference value.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_test_util.hpp"

using namespace hetrain;
using gpu_test::expect_close;

namespace {
double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::abs(x)));
  return m;
}

void check_linear(int N, int I, int O, bool with_bias, bool want_din, bool tf32, uint32_t seed) {
  SCOPED_TRACE("N" + std::to_string(N) + " I" + std::to_string(I) + " O" + std::to_string(O) +
               (with_bias ? "" : " no-bias") + (want_din ? "" : " no-din") + (tf32 ? " tf32" : ""));
  const size_t nin = size_t(N) * I, nw = size_t(O) * I, nout = size_t(N) * O;
  auto in = gpu_test::random_floats(nin, seed), w = gpu_test::random_floats(nw, seed + 1);
  auto b = gpu_test::random_floats(O, seed + 2), dout = gpu_test::random_floats(nout, seed + 3);
  // Gradients start non-zero: dweight and dbias accumulate, din is overwritten.
  std::vector<float> out_ref(nout), din_ref(nin, 7.0f), dw_ref(nw, 0.5f), db_ref(O, -0.25f);
  ops::cpu::linear_forward(out_ref.data(), in.data(), w.data(), with_bias ? b.data() : nullptr, N, I, O);
  ops::cpu::linear_backward(want_din ? din_ref.data() : nullptr, dw_ref.data(), with_bias ? db_ref.data() : nullptr,
                       dout.data(), in.data(), w.data(), N, I, O);

  cuda::DeviceBuffer<float> d_in(nin), d_w(nw), d_b(O), d_out(nout), d_dout(nout), d_din(nin), d_dw(nw), d_db(O);
  d_in.upload(in), d_w.upload(w), d_b.upload(b), d_dout.upload(dout);
  d_din.upload(std::vector<float>(nin, 7.0f)), d_dw.upload(std::vector<float>(nw, 0.5f));
  d_db.upload(std::vector<float>(O, -0.25f));
  d_out.upload(std::vector<float>(nout, 3.0f));  // must be overwritten, bias or not
  CudaStream s = cuda::stream_create();
  cuda::linear_forward(d_out.data(), d_in.data(), d_w.data(), with_bias ? d_b.data() : nullptr, N, I, O, s, tf32 ? Precision::TF32 : Precision::FP32);
  cuda::linear_backward(want_din ? d_din.data() : nullptr, d_dw.data(), with_bias ? d_db.data() : nullptr,
                        d_dout.data(), d_in.data(), d_w.data(), N, I, O, s, tf32 ? Precision::TF32 : Precision::FP32);
  cuda::stream_synchronize(s);
  cuda::stream_destroy(s);
  const double r = tf32 ? 5e-3 : 0.0;
  expect_close("out", d_out.download(), out_ref, 1e-4 * std::sqrt(I) + r * max_abs(out_ref), 1e-4);
  expect_close("din", d_din.download(), din_ref, 1e-4 * std::sqrt(O) + r * max_abs(din_ref), 1e-4);
  expect_close("dweight", d_dw.download(), dw_ref, 1e-4 * std::sqrt(N) + r * max_abs(dw_ref), 1e-4);
  expect_close("dbias", d_db.download(), db_ref, 1e-4 * std::sqrt(N), 1e-4);
}
}  // namespace

TEST(CudaLinear, ParityOddShapesFp32) {
  HT_REQUIRE_GPU();
  check_linear(7, 33, 13, true, true, false, 71);
  check_linear(1, 5, 3, true, true, false, 72);       // one sample
  check_linear(64, 2048, 1000, true, true, false, 73);  // ResNet-50 head
  check_linear(9, 17, 10, false, false, false, 74);   // no bias, no din (first layer)
}

TEST(CudaLinear, ParityTf32) {
  HT_REQUIRE_GPU();
  check_linear(64, 2048, 1000, true, true, true, 75);
}

TEST(CudaLinear, EmptyBatchLeavesGradients) {
  HT_REQUIRE_GPU();
  cuda::DeviceBuffer<float> w(6), dw(6);
  dw.upload(std::vector<float>(6, 0.5f));
  cuda::linear_backward(nullptr, dw.data(), nullptr, nullptr, nullptr, w.data(), 0, 3, 2, nullptr);
  expect_close("dweight", dw.download(), std::vector<float>(6, 0.5f), 0, 0);
  EXPECT_THROW(cuda::linear_forward(w.data(), w.data(), w.data(), nullptr, 1, 0, 2, nullptr), Error);
}
