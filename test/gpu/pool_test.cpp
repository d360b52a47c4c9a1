// test/gpu/pool_test.cpp — cuda:: max, average and global average pooling against ops::cpu::'s.
// Tolerances (atol + rtol·|ref|): max pooling forward exact, backward 1e-6 + 1e-5 (overlapping windows add
// in another order); average pooling 1e-6 + 1e-5 both ways; global average forward 1e-6 + 1e-5 (HW-term sum
// in another order), backward exact (one division).
#include <gtest/gtest.h>

#include "gpu_test_util.hpp"

using namespace hetrain;
using gpu_test::expect_close;

namespace {
Pool2dGeom geom(int N, int C, int H, int W, int kernel, int stride, int pad) {
  Pool2dGeom g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.kernel = kernel, g.stride = stride, g.pad = pad;
  return g;
}

std::string describe(const Pool2dGeom& g) {
  return "N" + std::to_string(g.N) + " C" + std::to_string(g.C) + " " + std::to_string(g.H) + "x" +
         std::to_string(g.W) + " kernel " + std::to_string(g.kernel) + " stride " + std::to_string(g.stride) +
         " pad " + std::to_string(g.pad);
}

void check_pool(const Pool2dGeom& g, bool max, uint32_t seed) {
  SCOPED_TRACE(std::string(max ? "max " : "avg ") + describe(g));
  const size_t nin = size_t(g.N) * g.C * g.H * g.W, nout = size_t(g.N) * g.C * g.P() * g.Q();
  auto in = gpu_test::random_floats(nin, seed), dout = gpu_test::random_floats(nout, seed + 1);
  std::vector<float> out_ref(nout), din_ref(nin);
  if (max) {
    std::vector<int32_t> argmax(nout);
    ops::cpu::maxpool2d_forward(out_ref.data(), argmax.data(), in.data(), g);
    ops::cpu::maxpool2d_backward(din_ref.data(), dout.data(), argmax.data(), g);
  } else {
    ops::cpu::avgpool2d_forward(out_ref.data(), in.data(), g);
    ops::cpu::avgpool2d_backward(din_ref.data(), dout.data(), g);
  }
  cuda::DeviceBuffer<float> d_in(nin), d_out(nout), d_dout(nout), d_din(nin);
  d_in.upload(in), d_dout.upload(dout);
  d_din.upload(std::vector<float>(nin, 7.0f));  // must be overwritten
  CudaStream s = cuda::stream_create();
  if (max) {
    cuda::maxpool2d_forward(d_out.data(), d_in.data(), g, s);
    cuda::maxpool2d_backward(d_din.data(), d_dout.data(), d_out.data(), d_in.data(), g, s);
  } else {
    cuda::avgpool2d_forward(d_out.data(), d_in.data(), g, s);
    cuda::avgpool2d_backward(d_din.data(), d_dout.data(), d_in.data(), g, s);
  }
  cuda::stream_synchronize(s);
  cuda::stream_destroy(s);
  expect_close("out", d_out.download(), out_ref, max ? 0.0 : 1e-6, max ? 0.0 : 1e-5);
  expect_close("din", d_din.download(), din_ref, 1e-6, 1e-5);
}
}  // namespace

TEST(CudaPool, MaxParityOddShapes) {
  HT_REQUIRE_GPU();
  check_pool(geom(2, 3, 9, 11, 3, 2, 1), true, 31);  // ResNet stem pool: overlapping windows, padding
  check_pool(geom(3, 4, 7, 7, 2, 2, 0), true, 32);   // odd size: the last row/column is dropped
  check_pool(geom(1, 5, 6, 5, 3, 1, 1), true, 33);   // stride 1, heavy overlap
  check_pool(geom(2, 2, 8, 8, 4, 3, 2), true, 34);   // pad = kernel/2
}

TEST(CudaPool, AvgParityCountsPadding) {
  HT_REQUIRE_GPU();
  check_pool(geom(2, 3, 9, 11, 3, 2, 1), false, 41);  // border windows divide by 9 (count_include_pad)
  check_pool(geom(3, 4, 7, 7, 2, 2, 0), false, 42);
  check_pool(geom(1, 5, 6, 5, 3, 1, 1), false, 43);
  check_pool(geom(2, 2, 8, 8, 4, 3, 2), false, 44);
}

TEST(CudaPool, BadGeometryIsRejected) {
  HT_REQUIRE_GPU();
  cuda::DeviceBuffer<float> buf(64);
  EXPECT_THROW(cuda::maxpool2d_forward(buf.data(), buf.data(), geom(1, 1, 4, 4, 2, 2, 2), nullptr), Error);  // pad > k/2
  EXPECT_THROW(cuda::avgpool2d_forward(buf.data(), buf.data(), geom(1, 1, 2, 2, 3, 1, 0), nullptr), Error);  // no output
}

TEST(CudaGlobalAvgPool, ParityOddShapes) {
  HT_REQUIRE_GPU();
  struct Shape {
    int N, C, HW;
  };
  uint32_t seed = 51;
  for (Shape sh : {Shape{2, 3, 7 * 7}, Shape{5, 13, 1}, Shape{3, 7, 33}, Shape{4, 2048, 7 * 7}, Shape{1, 9, 1000}}) {
    SCOPED_TRACE("N" + std::to_string(sh.N) + " C" + std::to_string(sh.C) + " HW" + std::to_string(sh.HW));
    const size_t nin = size_t(sh.N) * sh.C * sh.HW, nout = size_t(sh.N) * sh.C;
    auto in = gpu_test::random_floats(nin, seed++), dout = gpu_test::random_floats(nout, seed++);
    std::vector<float> out_ref(nout), din_ref(nin);
    ops::cpu::global_avgpool_forward(out_ref.data(), in.data(), sh.N, sh.C, sh.HW);
    ops::cpu::global_avgpool_backward(din_ref.data(), dout.data(), sh.N, sh.C, sh.HW);
    cuda::DeviceBuffer<float> d_in(nin), d_out(nout), d_dout(nout), d_din(nin);
    d_in.upload(in), d_dout.upload(dout);
    cuda::global_avgpool_forward(d_out.data(), d_in.data(), sh.N, sh.C, sh.HW, nullptr);
    cuda::global_avgpool_backward(d_din.data(), d_dout.data(), sh.N, sh.C, sh.HW, nullptr);
    expect_close("out", d_out.download(), out_ref, 1e-6, 1e-5);
    expect_close("din", d_din.download(), din_ref, 0, 0);
  }
}
