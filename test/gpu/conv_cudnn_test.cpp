// test/gpu/conv_cudnn_test.cpp — cuda::CudnnConv2d against ops::cpu::conv2d_forward_naive / backward_naive.
// FP32 (no TF32): atol 1e-4 + rtol 1e-4 for out and din, atol 1e-3 + rtol 1e-4 for dweight and dbias (sums
// over N·P·Q terms in a different order). With TF32 (10-bit mantissa): rtol 5e-3 relative to the largest
// reference value.
#include <gtest/gtest.h>

#include <cmath>

#include "gpu_test_util.hpp"

using namespace hetrain;
using gpu_test::expect_close;

namespace {
void check_conv(const Conv2dGeom& g, bool tf32, uint32_t seed) {
  SCOPED_TRACE("N" + std::to_string(g.N) + " C" + std::to_string(g.C) + " " + std::to_string(g.H) + "x" +
               std::to_string(g.W) + " K" + std::to_string(g.K) + " " + std::to_string(g.R) + "x" +
               std::to_string(g.S) + " stride " + std::to_string(g.stride) + " pad " + std::to_string(g.pad) +
               (tf32 ? " tf32" : ""));
  const size_t nin = size_t(g.N) * g.C * g.H * g.W, nw = size_t(g.K) * g.C * g.R * g.S;
  const size_t nout = size_t(g.N) * g.K * g.P() * g.Q();
  auto in = gpu_test::random_floats(nin, seed), w = gpu_test::random_floats(nw, seed + 1);
  auto bias = gpu_test::random_floats(g.K, seed + 2), dout = gpu_test::random_floats(nout, seed + 3);
  // Gradients start non-zero: dweight and dbias must accumulate, din must be overwritten.
  std::vector<float> out_ref(nout), din_ref(nin, 7.0f), dw_ref(nw, 0.5f), db_ref(g.K, -0.25f);
  ops::cpu::conv2d_forward_naive(out_ref.data(), in.data(), w.data(), bias.data(), g);
  ops::cpu::conv2d_backward_naive(din_ref.data(), dw_ref.data(), db_ref.data(), dout.data(), in.data(), w.data(), g);

  cuda::DeviceBuffer<float> d_in(nin), d_w(nw), d_b(g.K), d_out(nout), d_dout(nout), d_din(nin), d_dw(nw), d_db(g.K);
  d_in.upload(in);
  d_w.upload(w);
  d_b.upload(bias);
  d_dout.upload(dout);
  d_din.upload(std::vector<float>(nin, 7.0f));
  d_dw.upload(std::vector<float>(nw, 0.5f));
  d_db.upload(std::vector<float>(g.K, -0.25f));
  cuda::CudnnConvOptions opt;
  opt.precision = tf32 ? Precision::TF32 : Precision::FP32;
  cuda::CudnnConv2d conv(g, opt);
  CudaStream s = cuda::stream_create();
  conv.forward(d_out.data(), d_in.data(), d_w.data(), d_b.data(), s);
  conv.backward(d_din.data(), d_dw.data(), d_db.data(), d_dout.data(), d_in.data(), d_w.data(), s);
  cuda::stream_synchronize(s);
  cuda::stream_destroy(s);
  std::cout << "  algorithms " << conv.algorithms() << ", workspace " << conv.workspace_bytes() << " bytes\n";
  auto scale_of = [](const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::abs(x)));
    return m;
  };
  const double r = tf32 ? 5e-3 : 0.0;
  expect_close("out", d_out.download(), out_ref, 1e-4 + r * scale_of(out_ref), 1e-4);
  expect_close("din", d_din.download(), din_ref, 1e-4 + r * scale_of(din_ref), 1e-4);
  expect_close("dweight", d_dw.download(), dw_ref, 1e-3 + r * scale_of(dw_ref), 1e-4);
  expect_close("dbias", d_db.download(), db_ref, 1e-3, 1e-4);
}

Conv2dGeom geom(int N, int C, int H, int W, int K, int R, int S, int stride, int pad) {
  Conv2dGeom g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.K = K, g.R = R, g.S = S, g.stride = stride, g.pad = pad;
  return g;
}
}  // namespace

TEST(CudaConv, ParityOddShapesFp32) {
  HT_REQUIRE_GPU();
  check_conv(geom(2, 3, 7, 9, 5, 3, 3, 2, 1), false, 1);   // odd sizes, stride 2
  check_conv(geom(3, 16, 8, 8, 8, 1, 1, 1, 0), false, 2);  // 1×1 (ResNet bottleneck)
  check_conv(geom(1, 3, 19, 17, 4, 7, 7, 2, 3), false, 3); // ResNet stem shape, small
  check_conv(geom(5, 6, 5, 6, 7, 3, 2, 1, 0), false, 4);   // non-square kernel, no padding
}

TEST(CudaConv, ParityTf32AndAlgorithmCache) {
  HT_REQUIRE_GPU();
  check_conv(geom(4, 32, 14, 14, 32, 3, 3, 1, 1), true, 5);
  check_conv(geom(4, 32, 14, 14, 32, 3, 3, 1, 1), true, 6);  // same shape: served from the cache
}

TEST(CudaConv, WorkspaceBoundIsHonoured) {
  HT_REQUIRE_GPU();
  cuda::CudnnConvOptions opt;
  opt.max_workspace_bytes = 0;  // only algorithms that need no workspace
  cuda::CudnnConv2d conv(geom(2, 8, 12, 12, 8, 3, 3, 1, 1), opt);
  EXPECT_EQ(conv.workspace_bytes(), 0u);
}

// The search counter the trainer uses to keep algorithm-measuring steps out of the balancer's timings:
// a new shape searches once, the same shape again is served from the cache.
TEST(CudaConv, SearchesAreCountedOncePerShape) {
  HT_REQUIRE_GPU();
  const int64_t before = cuda::conv_algorithm_searches();
  { cuda::CudnnConv2d a(geom(3, 5, 9, 9, 7, 3, 3, 1, 1)); }
  EXPECT_EQ(cuda::conv_algorithm_searches(), before + 1);
  { cuda::CudnnConv2d b(geom(3, 5, 9, 9, 7, 3, 3, 1, 1)); }
  EXPECT_EQ(cuda::conv_algorithm_searches(), before + 1);
  { cuda::CudnnConv2d c(geom(4, 5, 9, 9, 7, 3, 3, 1, 1)); }  // another batch size is another shape
  EXPECT_EQ(cuda::conv_algorithm_searches(), before + 2);
}

// Every library call takes its stream explicitly (src/cuda/handles.hpp). The shared cuDNN handle keeps the
// stream of its last call; here that stream is destroyed before a new shape's algorithm search, which once
// ran on it (a freed stream: an error or worse). Each round leaves the handle on a stream that is gone.
TEST(CudaConv, SearchAfterTheLastStreamWasDestroyed) {
  HT_REQUIRE_GPU();
  cuda::DeviceBuffer<float> x(4 * 4 * 6 * 6), y(4 * 4 * 6 * 6);
  x.upload(gpu_test::random_floats(x.size(), 7));
  for (int round = 0; round < 3; ++round) {
    CudaStream s = cuda::stream_create();
    Pool2dGeom pool;  // [4, 4, 6, 6], 2×2 windows
    pool.N = 4, pool.C = 4, pool.H = 6, pool.W = 6;
    cuda::maxpool2d_forward(y.data(), x.data(), pool, s);  // a cuDNN call: the handle is now set to s
    cuda::stream_synchronize(s);
    cuda::stream_destroy(s);
    const int64_t before = cuda::conv_algorithm_searches();
    cuda::CudnnConv2d conv(geom(2 + round, 3, 11, 13, 5, 3, 3, 1, 1));  // a new shape each round: a search
    EXPECT_EQ(cuda::conv_algorithm_searches(), before + 1);
  }
  cuda::device_synchronize();
  check_conv(geom(2, 3, 11, 13, 5, 3, 3, 1, 1), false, 8);  // the chosen algorithms are still right
}

// A new shape near the memory cap (the first step after the balancer grew this rank's batch): the search
// measures on buffers it allocates itself, bounded by half the memory free after its operands, and the
// chosen algorithms still compute the right thing. 128 MiB are left free: the test's own buffers (about
// 6 MiB), the search's operands and a search workspace of half the rest fit, with room for the kernels
// cuDNN loads lazily during the search; what cuDNN's own search would have allocated need not. One
// convolution runs first, so the handle and the common kernels are loaded before memory gets short.
TEST(CudaConv, SearchNearTheMemoryCap) {
  HT_REQUIRE_GPU();
  check_conv(geom(2, 3, 11, 13, 5, 3, 3, 1, 1), false, 8);  // warm-up: handle, kernels
  cuda::device_synchronize();
  const size_t free_bytes = cuda_device_info(0).free_bytes;
  const size_t leave = size_t(128) << 20;
  ASSERT_GT(free_bytes, 2 * leave);
  cuda::DeviceBuffer<char> hog(free_bytes - leave);
  const int64_t heuristic_before = cuda::conv_algorithm_heuristic_choices();
  const int64_t searches_before = cuda::conv_algorithm_searches();
  check_conv(geom(7, 64, 28, 28, 64, 3, 3, 1, 1), false, 9);  // a shape no other test uses
  EXPECT_EQ(cuda::conv_algorithm_searches(), searches_before + 1);
  EXPECT_EQ(cuda::conv_algorithm_heuristic_choices(), heuristic_before);  // measured, not guessed
}
