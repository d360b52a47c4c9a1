// Convolution: finite-difference gradients (double) of the optimised op and of its naive twin, each float
// implementation (oneDNN when built with it, im2col + GEMM) against the naive one on awkward shapes, and
// the accumulate/overwrite contract.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "hetrain/error.hpp"
#include "hetrain/ops.hpp"
#include "op_test_util.hpp"

using namespace hetrain;
using namespace hetrain::ops::cpu;
using namespace ops_test;

namespace {

Conv2dGeom geom(int N, int C, int H, int W, int K, int R, int S, int stride, int pad) {
  Conv2dGeom g;
  g.N = N, g.C = C, g.H = H, g.W = W, g.K = K, g.R = R, g.S = S, g.stride = stride, g.pad = pad;
  return g;
}
size_t in_size(const Conv2dGeom& g) { return size_t(g.N) * g.C * g.H * g.W; }
size_t out_size(const Conv2dGeom& g) { return size_t(g.N) * g.K * g.P() * g.Q(); }
size_t w_size(const Conv2dGeom& g) { return size_t(g.K) * g.C * g.R * g.S; }

// Shapes for the float comparison: each line names what it exercises.
std::vector<Conv2dGeom> odd_shapes() {
  return {
      geom(3, 5, 11, 7, 6, 3, 3, 1, 1),   // 3×3 same-padding, non-square input
      geom(2, 3, 9, 12, 7, 3, 3, 2, 1),   // stride 2 with padding
      geom(3, 7, 5, 6, 5, 1, 1, 1, 0),    // 1×1 stride 1, small plane: no unfolding
      geom(3, 5, 32, 33, 6, 1, 1, 1, 0),  // 1×1 stride 1, a large plane: no unfolding
      geom(2, 4, 7, 9, 3, 1, 1, 2, 0),    // 1×1 stride 2 (ResNet shortcut): im2col path
      geom(2, 3, 23, 17, 5, 7, 7, 2, 3),  // 7×7 stride 2 pad 3 (ResNet stem)
      geom(1, 1, 6, 10, 3, 3, 3, 1, 0),   // batch 1, C = 1, no padding
      geom(70, 3, 8, 8, 5, 5, 5, 1, 2),   // 5×5; 70 samples = 4 groups of 16 plus a tail of 6
      geom(4, 2, 7, 8, 3, 3, 5, 1, 1),    // non-square kernel
      geom(5, 6, 4, 4, 13, 3, 3, 2, 1),   // tiny plane, K = 13
      geom(16, 16, 20, 20, 32, 3, 3, 1, 1),  // big enough for the OpenMP paths (im2col, scatter, bias)
      geom(4, 32, 9, 9, 64, 3, 3, 2, 1),     // channels in whole blocks of 16 (oneDNN nChw16c), stride 2
  };
}

struct Grads {
  std::vector<double> din, dw, db;
};

using BackwardFn = void (*)(const Conv2dGeom&, const std::vector<double>&, const std::vector<double>&,
                            const std::vector<double>&, Grads*);

void backward_fast(const Conv2dGeom& g, const std::vector<double>& x, const std::vector<double>& w,
                   const std::vector<double>& dy, Grads* gr) {
  std::vector<double> ws(conv2d_workspace_size(g));
  conv2d_backward(gr->din.data(), gr->dw.data(), gr->db.data(), dy.data(), x.data(), w.data(), g, ws.data());
}
void backward_naive(const Conv2dGeom& g, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& dy, Grads* gr) {
  conv2d_backward_naive(gr->din.data(), gr->dw.data(), gr->db.data(), dy.data(), x.data(), w.data(), g);
}

// loss = Σ out · G for a fixed random G, so ∂loss/∂out = G.
void gradient_check(const Conv2dGeom& g, bool fast, uint32_t seed) {
  auto x = random_vec<double>(in_size(g), seed);
  auto w = random_vec<double>(w_size(g), seed + 1);
  auto b = random_vec<double>(g.K, seed + 2);
  const auto G = random_vec<double>(out_size(g), seed + 3);
  std::vector<double> ws(conv2d_workspace_size(g)), y(out_size(g));
  auto loss = [&] {
    if (fast)
      conv2d_forward(y.data(), x.data(), w.data(), b.data(), g, ws.data());
    else
      conv2d_forward_naive(y.data(), x.data(), w.data(), b.data(), g);
    return dot(y, G);
  };
  Grads gr{std::vector<double>(x.size()), std::vector<double>(w.size()), std::vector<double>(g.K)};
  (fast ? backward_fast : backward_naive)(g, x, w, G, &gr);
  expect_gradient("din", x, gr.din, loss);
  expect_gradient("dweight", w, gr.dw, loss);
  expect_gradient("dbias", b, gr.db, loss);
}

}  // namespace

TEST(Conv2dGrad, FiniteDifferences3x3Stride2Pad1) {
  const auto g = geom(2, 3, 6, 5, 4, 3, 3, 2, 1);
  gradient_check(g, true, 11);
  gradient_check(g, false, 11);
}
TEST(Conv2dGrad, FiniteDifferences3x3Stride1Pad1) {
  const auto g = geom(3, 2, 5, 6, 3, 3, 3, 1, 1);
  gradient_check(g, true, 21);
  gradient_check(g, false, 21);
}
TEST(Conv2dGrad, FiniteDifferencesPointwise) {
  const auto g = geom(3, 4, 3, 5, 3, 1, 1, 1, 0);
  gradient_check(g, true, 31);
  gradient_check(g, false, 31);
}
TEST(Conv2dGrad, FiniteDifferences7x7Stride2Pad3NonSquareKernel) {
  gradient_check(geom(2, 2, 9, 8, 3, 7, 7, 2, 3), true, 41);
  gradient_check(geom(2, 2, 6, 7, 3, 3, 5, 1, 2), true, 51);
}

// Float tests run once per implementation: Auto (oneDNN in a build with it, else im2col) and Im2col.
class Conv2dFloat : public ::testing::TestWithParam<CpuConvBackend> {
 protected:
  void SetUp() override { set_cpu_conv_backend(GetParam()); }
  void TearDown() override { set_cpu_conv_backend(CpuConvBackend::Auto); }
};
INSTANTIATE_TEST_SUITE_P(Backends, Conv2dFloat, ::testing::Values(CpuConvBackend::Auto, CpuConvBackend::Im2col),
                         [](const auto& info) {
                           return std::string(info.param == CpuConvBackend::Auto ? "Auto" : "Im2col");
                         });

// Float: the op against the double-accumulating naive twin. Errors grow with the number of terms in each
// sum (C·R·S for out and din, N·P·Q for dweight), so the tolerance is scaled by √terms:
// |got − ref| ≤ 2e-6·√terms·(1 + |ref|).
TEST_P(Conv2dFloat, MatchesNaiveOnOddShapes) {
  SCOPED_TRACE(::testing::Message() << "implementation " << cpu_conv_backend_name());
  uint32_t seed = 100;
  for (const auto& g : odd_shapes()) {
    SCOPED_TRACE(::testing::Message() << "N=" << g.N << " C=" << g.C << " H=" << g.H << " W=" << g.W
                                      << " K=" << g.K << " R=" << g.R << " S=" << g.S << " stride=" << g.stride
                                      << " pad=" << g.pad);
    const auto x = random_vec<float>(in_size(g), seed++);
    const auto w = random_vec<float>(w_size(g), seed++);
    const auto b = random_vec<float>(g.K, seed++);
    const auto dy = random_vec<float>(out_size(g), seed++);
    // Workspace poisoned with NaN and one element too large: the op must not read what it did not write.
    std::vector<float> ws(conv2d_workspace_size(g) + 1, std::numeric_limits<float>::quiet_NaN());

    std::vector<float> y(out_size(g)), y_ref(out_size(g));
    conv2d_forward(y.data(), x.data(), w.data(), b.data(), g, ws.data());
    conv2d_forward_naive(y_ref.data(), x.data(), w.data(), b.data(), g);
    const double t_crs = std::sqrt(double(g.C * g.R * g.S)), t_npq = std::sqrt(double(g.N * g.P() * g.Q()));
    expect_close("out", y, y_ref, 2e-6 * t_crs, 2e-6 * t_crs);

    // Parameter gradients start non-zero (they accumulate); din starts as garbage (it is overwritten).
    std::vector<float> din(in_size(g), 7.f), din_ref(in_size(g), -3.f);
    std::vector<float> dw(w_size(g), 0.5f), dw_ref(w_size(g), 0.5f), db(g.K, 0.25f), db_ref(g.K, 0.25f);
    conv2d_backward(din.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), g, ws.data());
    conv2d_backward_naive(din_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(), w.data(), g);
    expect_close("din", din, din_ref, 2e-6 * t_crs, 2e-6 * t_crs);
    expect_close("dweight", dw, dw_ref, 2e-6 * t_npq, 2e-6 * t_npq);
    expect_close("dbias", db, db_ref, 2e-6 * t_npq, 2e-6 * t_npq);
  }
}

TEST_P(Conv2dFloat, NullGradientsAreSkipped) {
  const auto g = geom(2, 3, 6, 6, 4, 3, 3, 1, 1);
  const auto x = random_vec<float>(in_size(g), 1), w = random_vec<float>(w_size(g), 2),
             dy = random_vec<float>(out_size(g), 3);
  std::vector<float> ws(conv2d_workspace_size(g));
  std::vector<float> din(in_size(g)), din_ref(in_size(g), 1.f), dw(w_size(g)), dw_ref(w_size(g));
  conv2d_backward<float>(din.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), g, ws.data());
  conv2d_backward<float>(nullptr, dw.data(), nullptr, dy.data(), x.data(), w.data(), g, ws.data());
  conv2d_backward_naive<float>(din_ref.data(), dw_ref.data(), nullptr, dy.data(), x.data(), w.data(), g);
  expect_close("din", din, din_ref, 1e-5, 1e-5);
  expect_close("dweight", dw, dw_ref, 1e-4, 1e-5);
}

TEST(Conv2dWorkspace, Im2colGrowsWithBatchAndIsZeroForPointwise) {
  auto g = geom(1, 16, 32, 32, 16, 3, 3, 1, 1);
  EXPECT_EQ(conv2d_im2col_workspace_size(g), 16 * 9 * 1024);  // one sample: columns only
  int64_t prev = 0;
  for (int n : {1, 2, 4, 8, 128}) {
    g.N = n;
    EXPECT_GE(conv2d_im2col_workspace_size(g), prev);
    prev = conv2d_im2col_workspace_size(g);
    EXPECT_GE(conv2d_workspace_size(g), prev);  // the dispatching size also covers the im2col twin
  }
  EXPECT_EQ(conv2d_im2col_workspace_size(geom(8, 16, 32, 32, 32, 1, 1, 1, 0)), 0);
  EXPECT_THROW(conv2d_workspace_size(geom(1, 3, 2, 2, 1, 5, 5, 1, 0)), hetrain::Error);  // kernel > input
  // ... also with a stride, where (2 − 4) / 3 + 1 truncates to 1 output row
  EXPECT_EQ(geom(1, 3, 2, 2, 1, 4, 4, 3, 0).P(), 0);
  EXPECT_THROW(conv2d_workspace_size(geom(1, 3, 2, 2, 1, 4, 4, 3, 0)), hetrain::Error);
}

TEST_P(Conv2dFloat, EmptyBatchIsANoOp) {
  const auto g = geom(0, 3, 6, 6, 4, 3, 3, 1, 1);
  std::vector<float> w(w_size(g), 1.f), dw(w_size(g), 2.f), db(4, 3.f);
  conv2d_forward<float>(nullptr, nullptr, w.data(), nullptr, g, nullptr);
  conv2d_backward<float>(nullptr, dw.data(), db.data(), nullptr, nullptr, w.data(), g, nullptr);
  EXPECT_EQ(dw[0], 2.f);
  EXPECT_EQ(db[3], 3.f);
}

// A sample's output and input gradient are the same bits whatever batch it is computed in (the balancer
// changes every rank's batch size; invariant 1): a batch at once against the same samples as a head of 5
// and the rest, on 1, 2 and 3 threads (a GEMM that oneDNN threads itself sums in another order). The
// shapes: lenet's two layers, a strided 3×3, an 8×8 plane, a strided 1×1 (its backward is im2col's also
// with oneDNN) and a 1×1 on a 32×32 plane (no unfolding).
TEST_P(Conv2dFloat, PerSampleResultsDoNotDependOnTheBatchSize) {
  const int threads_before = omp_get_max_threads();
  for (const int threads : {1, 2, 3})
  for (const auto& full : {geom(37, 1, 28, 28, 6, 5, 5, 1, 2), geom(37, 6, 14, 14, 16, 5, 5, 1, 0),
                           geom(29, 16, 16, 16, 32, 3, 3, 2, 1), geom(21, 64, 8, 8, 64, 3, 3, 1, 1),
                           geom(13, 16, 14, 14, 32, 1, 1, 2, 0), geom(9, 8, 32, 32, 8, 1, 1, 1, 0)}) {
    omp_set_num_threads(threads);
    SCOPED_TRACE(::testing::Message() << threads << " thread(s), C=" << full.C << " H=" << full.H
                                      << " K=" << full.K << " R=" << full.R << " stride=" << full.stride);
    const int head = 5;
    Conv2dGeom a = full, b = full;
    a.N = head, b.N = full.N - head;
    const auto x = random_vec<float>(in_size(full), 21), w = random_vec<float>(w_size(full), 22),
               dy = random_vec<float>(out_size(full), 23);
    std::vector<float> ws(std::max({conv2d_workspace_size(full), conv2d_workspace_size(a), conv2d_workspace_size(b)}));
    std::vector<float> y(out_size(full)), y_parts(y.size()), dx(x.size()), dx_parts(x.size());
    conv2d_forward<float>(y.data(), x.data(), w.data(), nullptr, full, ws.data());
    conv2d_forward<float>(y_parts.data(), x.data(), w.data(), nullptr, a, ws.data());
    conv2d_forward<float>(y_parts.data() + out_size(a), x.data() + in_size(a), w.data(), nullptr, b, ws.data());
    EXPECT_EQ(y, y_parts);
    conv2d_backward<float>(dx.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), full, ws.data());
    conv2d_backward<float>(dx_parts.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), a, ws.data());
    conv2d_backward<float>(dx_parts.data() + in_size(a), nullptr, nullptr, dy.data() + out_size(a),
                           x.data() + in_size(a), w.data(), b, ws.data());
    EXPECT_EQ(dx, dx_parts);
  }
  omp_set_num_threads(threads_before);
}
