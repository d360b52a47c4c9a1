// test/gpu/new_ops_test.cpp — the CUDA slots of ops/silu, ops/upsample, ops/concat and ops/detect_rows
// against their CPU slots, through the Tensor-level entry points (CUDA tensors vs CPU tensors).
// Tolerances: silu and sigmoid within 1e-6 + 1e-5·|ref| (the device's expf and the host's exp differ by a
// few ulps); everything else exactly (tolerance 0): copies, and the upsample backward sums each block in the
// same order on both devices.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.hpp"
#include "hetrain/tensor.hpp"
#include "ops/concat/concat.hpp"
#include "ops/detect_rows/detect_rows.hpp"
#include "ops/silu/silu.hpp"
#include "ops/upsample/upsample.hpp"

using namespace hetrain;
using namespace hetrain::ops;
using gpu_test::expect_close;

namespace {
Tensor cpu_tensor(const Shape& shape, const std::vector<float>& v) {
  Tensor t(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = v[size_t(i)];
  return t;
}
Tensor random_cpu(const Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return cpu_tensor(shape, gpu_test::random_floats(size_t(shape_numel(shape)), seed, lo, hi));
}
Tensor filled_cpu(const Shape& shape, float v) {
  Tensor t(shape);
  t.fill(v);
  return t;
}
Tensor cuda_copy(const Tensor& t) { return t.to(Device::CUDA); }
// The tensor's elements on the host (waits for the device).
std::vector<float> host(const Tensor& t) {
  const Tensor c = t.to(Device::CPU);
  return std::vector<float>(c.data(), c.data() + c.numel());
}
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

// Values over [−12, 12] with 0, ±100, ±1e4 and ±1e30 planted (saturation on both sides); then in place,
// y over x and dx over dy, on the device.
TEST(CudaNewOps, SiluSigmoidParity) {
  HT_REQUIRE_GPU();
  const double atol = 1e-6, rtol = 1e-5;
  for (int64_t n : {int64_t(1), int64_t(1000), int64_t(1) << 20 | 5}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    auto xv = gpu_test::random_floats(size_t(n), 71, -12.0f, 12.0f);
    const float planted[] = {0.0f, 100.0f, -100.0f, 1e4f, -1e4f, 1e30f, -1e30f};
    for (size_t i = 0; i < xv.size() && i < 7; ++i) xv[i * size_t(n) / 7] = planted[i];
    const Shape shape = {n};
    Tensor x = cpu_tensor(shape, xv), dy = random_cpu(shape, 72);
    Tensor y(shape), dx(shape), s(shape), ds(shape);
    silu_forward(y, x);
    silu_backward(dx, dy, x);
    sigmoid_forward(s, x);
    sigmoid_backward(ds, dy, s);

    Tensor gx = cuda_copy(x), gdy = cuda_copy(dy);
    Tensor gy(shape, Device::CUDA), gdx(shape, Device::CUDA), gs(shape, Device::CUDA), gds(shape, Device::CUDA);
    silu_forward(gy, gx);
    silu_backward(gdx, gdy, gx);
    sigmoid_forward(gs, gx);
    sigmoid_backward(gds, gdy, gs);
    expect_close("silu y", host(gy), host(y), atol, rtol);
    expect_close("silu dx", host(gdx), host(dx), atol, rtol);
    expect_close("sigmoid y", host(gs), host(s), atol, rtol);
    expect_close("sigmoid dx", host(gds), host(ds), atol, rtol);

    Tensor g = cuda_copy(dy);
    silu_backward(g, g, gx);
    expect_close("silu dx in place", host(g), host(dx), atol, rtol);
    Tensor g2 = cuda_copy(dy);
    sigmoid_backward(g2, g2, gs);
    expect_close("sigmoid dx in place", host(g2), host(ds), atol, rtol);
    Tensor ys = cuda_copy(x), ss = cuda_copy(x);
    silu_forward(ys, ys);
    sigmoid_forward(ss, ss);
    expect_close("silu y in place", host(ys), host(y), atol, rtol);
    expect_close("sigmoid y in place", host(ss), host(s), atol, rtol);
  }
}

// Odd sizes, factors 1..4, an empty batch and a YOLOv5-sized map. Outputs start as NaN: every element must
// be written.
TEST(CudaNewOps, UpsampleParity) {
  HT_REQUIRE_GPU();
  struct Case { Shape x; int f; };
  for (const Case& c : {Case{{2, 3, 5, 7}, 2}, Case{{1, 4, 13, 10}, 3}, Case{{3, 2, 1, 1}, 4}, Case{{2, 2, 3, 3}, 1},
                        Case{{0, 3, 4, 4}, 2}, Case{{4, 128, 20, 20}, 2}}) {
    SCOPED_TRACE(shape_str(c.x) + " f=" + std::to_string(c.f));
    const Shape ys = {c.x[0], c.x[1], c.x[2] * c.f, c.x[3] * c.f};
    Tensor x = random_cpu(c.x, 81), dy = random_cpu(ys, 82);
    Tensor y = filled_cpu(ys, kNaN), dx = filled_cpu(c.x, kNaN);
    Tensor gy = cuda_copy(y), gdx = cuda_copy(dx);
    upsample_nearest_forward(y, x, c.f);
    upsample_nearest_backward(dx, dy, c.f);
    upsample_nearest_forward(gy, cuda_copy(x), c.f);
    upsample_nearest_backward(gdx, cuda_copy(dy), c.f);
    expect_close("y", host(gy), host(y), 0, 0);
    expect_close("dx", host(gdx), host(dx), 0, 0);
  }
}

// Three inputs (the middle gradient not needed), an empty batch, and a single large sample; copy_channels
// into the middle of a tensor leaves the other channels alone on the device too.
TEST(CudaNewOps, ConcatParity) {
  HT_REQUIRE_GPU();
  for (const Shape& nhw : {Shape{2, 5, 3}, Shape{0, 4, 4}, Shape{1, 80, 80}}) {
    SCOPED_TRACE("N, H, W = " + shape_str(nhw));
    const std::vector<int64_t> C = {3, 64, 1};
    std::vector<Tensor> xs, gxs;
    for (size_t i = 0; i < C.size(); ++i) {
      xs.push_back(random_cpu({nhw[0], C[i], nhw[1], nhw[2]}, uint32_t(90 + i)));
      gxs.push_back(cuda_copy(xs.back()));
    }
    const Shape ys = {nhw[0], 68, nhw[1], nhw[2]};
    Tensor y = filled_cpu(ys, kNaN), gy = cuda_copy(y);
    concat_channels_forward(y, xs);
    concat_channels_forward(gy, gxs);
    expect_close("y", host(gy), host(y), 0, 0);

    Tensor dy = random_cpu(ys, 95), gdy = cuda_copy(dy);
    std::vector<Tensor> dxs = {filled_cpu(xs[0].shape(), kNaN), Tensor(), filled_cpu(xs[2].shape(), kNaN)};
    std::vector<Tensor> gdxs = {cuda_copy(dxs[0]), Tensor(), cuda_copy(dxs[2])};
    concat_channels_backward(dxs, dy, C);
    concat_channels_backward(gdxs, gdy, C);
    expect_close("dx0", host(gdxs[0]), host(dxs[0]), 0, 0);
    expect_close("dx2", host(gdxs[2]), host(dxs[2]), 0, 0);

    Tensor dst = random_cpu(ys, 96), gdst = cuda_copy(dst);
    copy_channels(dst, 10, xs[1], 7, 50);
    copy_channels(gdst, 10, gxs[1], 7, 50);
    expect_close("copy_channels", host(gdst), host(dst), 0, 0);
  }
}

// Three levels into one rows tensor with a row before and after them that no level owns (they must keep
// their sentinel), then each level's backward; an empty batch too.
TEST(CudaNewOps, DetectRowsParity) {
  HT_REQUIRE_GPU();
  struct Grid { int64_t H, W; };
  for (int64_t N : {int64_t(2), int64_t(0)}) {
    SCOPED_TRACE("N=" + std::to_string(N));
    const int64_t na = 3, no = 85;
    const std::vector<Grid> grids = {{40, 40}, {20, 20}, {7, 5}};
    int64_t A = 1;
    std::vector<int64_t> offsets;
    std::vector<Tensor> xs;
    for (const Grid& g : grids) {
      offsets.push_back(A);
      A += na * g.H * g.W;
      xs.push_back(random_cpu({N, na * no, g.H, g.W}, uint32_t(100 + xs.size())));
    }
    A += 1;
    Tensor out = filled_cpu({N, A, no}, -7.0f), gout = cuda_copy(out);
    for (size_t l = 0; l < grids.size(); ++l) {
      detect_rows_forward(out, offsets[l], xs[l], na);
      detect_rows_forward(gout, offsets[l], cuda_copy(xs[l]), na);
    }
    expect_close("out", host(gout), host(out), 0, 0);

    Tensor dout = random_cpu({N, A, no}, 110), gdout = cuda_copy(dout);
    for (size_t l = 0; l < grids.size(); ++l) {
      SCOPED_TRACE("level " + std::to_string(l));
      Tensor dx = filled_cpu(xs[l].shape(), kNaN), gdx = cuda_copy(dx);
      detect_rows_backward(dx, dout, offsets[l], na);
      detect_rows_backward(gdx, gdout, offsets[l], na);
      expect_close("dx", host(gdx), host(dx), 0, 0);
    }
  }
}

// A CPU tensor and a CUDA tensor given to one op: refused, naming the op, before any kernel runs.
TEST(CudaNewOps, MixedDevicesRefused) {
  HT_REQUIRE_GPU();
  Tensor c({2, 3}), g({2, 3}, Device::CUDA);
  Tensor g4({1, 2, 1, 3}, Device::CUDA);  // [N, C, H, W]; as a Detect level: na = 1, no = 2
  for (const auto& call : std::vector<std::pair<std::string, std::function<void()>>>{
           {"silu_forward", [&] { silu_forward(c, g); }},
           {"upsample_nearest_forward", [&] { upsample_nearest_forward(Tensor({1, 2, 2, 6}), g4, 2); }},
           {"copy_channels", [&] { copy_channels(Tensor({1, 2, 1, 3}), 0, g4, 0, 2); }},
           {"detect_rows_forward", [&] { detect_rows_forward(Tensor({1, 3, 2}), 0, g4, 1); }}}) {
    try {
      call.second();
      ADD_FAILURE() << call.first << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.message().rfind(call.first + ": tensors on different devices", 0), 0u) << e.what();
    }
  }
}
