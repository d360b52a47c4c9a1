// Batch norm's statistics modes (--bn, docs/architecture.md "Batch norm"): sync over one rank and ghost
// with one group are plain batch norm; ghost groups are plain batch norm per group; a rank with no
// samples joins sync's sums without changing them.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "hetrain/error.hpp"

#include "hetrain/nn.hpp"
#include "nn/batchnorm2d.hpp"
#include "nn/layer.hpp"
#include "test_util.hpp"

using namespace hetrain;
using namespace hetrain::nn;
using hetrain::nn::test::fill_uniform;
using test_support::expect_close;

namespace {

constexpr int kC = 3;

std::vector<float> values(const Tensor& t) {
  const Tensor h = t.to(Device::CPU);
  return std::vector<float>(h.data(), h.data() + h.numel());
}

// One batch-norm layer, its forward and backward on x with output gradient dy, under `mode` (null: local).
struct LayerRun {
  std::vector<float> y, dx, dgamma, dbeta, running_mean, running_var;
};
LayerRun run_layer(const BatchNormMode* mode, const Tensor& x, const Tensor& dy, int steps = 1) {
  ParamBuffer pb;
  Workspace ws;
  ws.batch_norm = mode;
  BatchNorm2d bn(pb, "bn", kC);
  bn.set_buffer_pool(&ws);
  pb.finalize();
  fill_uniform(pb.param(pb.find("bn.weight")), 11, 0.5f, 1.5f);
  fill_uniform(pb.param(pb.find("bn.bias")), 12);
  LayerRun r;
  for (int s = 0; s < steps; ++s) {
    pb.grads().zero();
    r.y = values(bn.forward(x, true));
    r.dx = values(bn.backward(dy));
  }
  r.dgamma = values(pb.grad(pb.find("bn.weight")));
  r.dbeta = values(pb.grad(pb.find("bn.bias")));
  r.running_mean = values(pb.state(pb.find_state("bn.running_mean")));
  r.running_var = values(pb.state(pb.find_state("bn.running_var")));
  return r;
}

void expect_same(const LayerRun& a, const LayerRun& b, double tol) {
  expect_close("y", a.y, b.y, tol, tol);
  expect_close("dx", a.dx, b.dx, tol, tol);
  expect_close("dgamma", a.dgamma, b.dgamma, tol, tol);
  expect_close("dbeta", a.dbeta, b.dbeta, tol, tol);
  expect_close("running_mean", a.running_mean, b.running_mean, tol, tol);
  expect_close("running_var", a.running_var, b.running_var, tol, tol);
}

Tensor random_tensor(Shape shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape));
  fill_uniform(t, seed, lo, hi);
  return t;
}

}  // namespace

TEST(BatchNormModes, SyncOverOneRankIsLocal) {
  // A mean far from zero and a running mean that moves: the shifted sums must keep their digits.
  const Tensor x = random_tensor({6, kC, 4, 5}, 1, 20.0f, 23.0f), dy = random_tensor({6, kC, 4, 5}, 2);
  BatchNormMode sync;
  sync.kind = BatchNormMode::Kind::Sync;
  int calls = 0;
  sync.sum_over_ranks = [&](double*, int) { ++calls; };
  expect_same(run_layer(&sync, x, dy, 3), run_layer(nullptr, x, dy, 3), 1e-5);
  EXPECT_EQ(calls, 6);  // one sum in forward, one in backward, per step
}

TEST(BatchNormModes, GhostWithOneGroupIsLocal) {
  const Tensor x = random_tensor({6, kC, 4, 5}, 3), dy = random_tensor({6, kC, 4, 5}, 4);
  BatchNormMode ghost;
  ghost.kind = BatchNormMode::Kind::Ghost;
  ghost.ghost_group = 6;
  expect_same(run_layer(&ghost, x, dy), run_layer(nullptr, x, dy), 1e-6);
}


TEST(BatchNormModes, GhostGroupsArePlainBatchNormEach) {
  // 10 samples in groups of 4: 4, 4 and a short last group of 2.
  const Tensor x = random_tensor({10, kC, 3, 3}, 5), dy = random_tensor({10, kC, 3, 3}, 6);
  BatchNormMode ghost;
  ghost.kind = BatchNormMode::Kind::Ghost;
  ghost.ghost_group = 4;
  const LayerRun whole = run_layer(&ghost, x, dy);
  std::vector<float> dgamma(kC, 0.0f), dbeta(kC, 0.0f), mean(kC, 0.0f), var(kC, 0.0f);
  const int64_t per_sample = kC * 3 * 3;
  for (int64_t begin : {0, 4, 8}) {
    const int64_t end = std::min<int64_t>(10, begin + 4);
    const LayerRun part = run_layer(nullptr, x.slice0(begin, end).clone(), dy.slice0(begin, end).clone());
    const std::vector<float> y(whole.y.begin() + begin * per_sample, whole.y.begin() + end * per_sample);
    const std::vector<float> dx(whole.dx.begin() + begin * per_sample, whole.dx.begin() + end * per_sample);
    expect_close("y of a group", y, part.y, 1e-6, 1e-6);
    expect_close("dx of a group", dx, part.dx, 1e-6, 1e-6);
    for (int c = 0; c < kC; ++c) {
      dgamma[c] += part.dgamma[c], dbeta[c] += part.dbeta[c];
      // One local step of momentum 0.1 from (0, 1): the group's statistic is 10·(running − initial).
      mean[c] += float(end - begin) / 10 * (part.running_mean[c] / 0.1f);
      var[c] += float(end - begin) / 10 * ((part.running_var[c] - 0.9f) / 0.1f);
    }
  }
  expect_close("dgamma, the groups' sum", whole.dgamma, dgamma, 1e-5, 1e-5);
  expect_close("dbeta, the groups' sum", whole.dbeta, dbeta, 1e-5, 1e-5);
  // One running update per step with the groups' statistics averaged by their sizes.
  std::vector<float> expected_mean(kC), expected_var(kC);
  for (int c = 0; c < kC; ++c) expected_mean[c] = 0.1f * mean[c], expected_var[c] = 0.9f + 0.1f * var[c];
  expect_close("running_mean", whole.running_mean, expected_mean, 1e-5, 1e-5);
  expect_close("running_var", whole.running_var, expected_var, 1e-5, 1e-5);
}

// A rank without samples runs a zero sample: it adds zeros to every sum, so the others' sums are what one
// rank alone would have; its own input gradient is zero and its parameter gradients stay untouched.
TEST(BatchNormModes, SyncWithoutSamplesAddsNothing) {
  const Tensor x = random_tensor({1, kC, 3, 3}, 7), dy = random_tensor({1, kC, 3, 3}, 8);
  BatchNormMode sync;
  sync.kind = BatchNormMode::Kind::Sync;
  sync.no_samples = true;
  sync.gradient_weight = 0;
  std::vector<std::vector<double>> seen;
  // The "other ranks" bring 2 samples' worth of values so that the statistics exist.
  sync.sum_over_ranks = [&](double* v, int n) {
    seen.emplace_back(v, v + n);
    if (n != 2 * kC + 1) return;  // forward: M = 18 and Σ(x − shift)² = 18 per channel
    v[2 * kC] += 18;
    for (int c = 0; c < kC; ++c) v[kC + c] += 18;
  };
  const LayerRun r = run_layer(&sync, x, dy);
  ASSERT_EQ(seen.size(), 2u);
  for (const auto& sums : seen)
    for (double v : sums) EXPECT_EQ(v, 0.0);
  for (float v : r.dx) EXPECT_EQ(v, 0.0f);
  for (int c = 0; c < kC; ++c) {
    EXPECT_EQ(r.dgamma[c], 0.0f);
    EXPECT_EQ(r.dbeta[c], 0.0f);
  }
  // It still takes the global statistics into its running ones (mean 0, biased var 1 → unbiased 18/17).
  for (int c = 0; c < kC; ++c) {
    EXPECT_NEAR(r.running_mean[c], 0.0f, 1e-7);
    EXPECT_NEAR(r.running_var[c], 0.9f + 0.1f * 18.0f / 17.0f, 1e-6);
  }
}

TEST(BatchNormModes, ParsesTheOption) {
  EXPECT_EQ(parse_batch_norm_mode("local").kind, BatchNormMode::Kind::Local);
  EXPECT_EQ(parse_batch_norm_mode("sync").kind, BatchNormMode::Kind::Sync);
  const BatchNormMode ghost = parse_batch_norm_mode("ghost:16");
  EXPECT_EQ(ghost.kind, BatchNormMode::Kind::Ghost);
  EXPECT_EQ(ghost.ghost_group, 16);
  EXPECT_EQ(batch_norm_mode_name(ghost), "ghost:16");
  for (const char* bad : {"", "Sync", "ghost", "ghost:", "ghost:1", "ghost:-4", "ghost:8x", "ghost:x"})
    EXPECT_THROW(parse_batch_norm_mode(bad), Error) << bad;
}
