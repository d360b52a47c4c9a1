// Initialisation: portable generator, determinism, torchvision statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "hetrain/nn.hpp"
#include "nn/init.hpp"

using namespace hetrain;
using namespace hetrain::nn;

namespace {
ModelConfig cfg(const std::string& name) {
  ModelConfig m;
  m.name = name;
  return m;
}
struct Stats {
  double mean = 0, stddev = 0, maxabs = 0;
};
Stats stats_of(const Tensor& t) {
  Stats s;
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    sum += t[i];
    sq += double(t[i]) * t[i];
    s.maxabs = std::max(s.maxabs, std::fabs(double(t[i])));
  }
  s.mean = sum / t.numel();
  s.stddev = std::sqrt(sq / t.numel() - s.mean * s.mean);
  return s;
}
}  // namespace

TEST(Init, GeneratorIsTheStandardMt19937_64) {
  // The C++ standard fixes the 10000th output of a default-seeded mt19937_64; uniform01 keeps its top 53 bits.
  PortableRng rng(5489u);
  for (int i = 0; i < 9999; ++i) rng.uniform01();
  EXPECT_EQ(static_cast<uint64_t>(rng.uniform01() * 0x1.0p53), 9981545732273789042ull >> 11);
}

TEST(Init, NormalHasUnitMoments) {
  PortableRng rng(7);
  const int n = 200000;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double z = rng.normal();
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);  // 4.5 standard errors
  EXPECT_NEAR(sq / n, 1.0, 0.015);
}

TEST(Init, SameSeedSameBitsDifferentSeedDifferent) {
  auto a = Model::create(cfg("resnet20"));
  auto b = Model::create(cfg("resnet20"));
  a->init(123);
  b->init(123);
  ASSERT_EQ(a->param_count(), b->param_count());
  const int64_t floats = a->params().count();
  EXPECT_EQ(std::memcmp(a->params().values().data(), b->params().values().data(), size_t(floats) * sizeof(float)), 0);
  b->init(124);
  int64_t same = 0;
  for (int64_t i = 0; i < floats; ++i) same += a->params().values()[i] == b->params().values()[i];
  // Only BN weights/biases (constants) and the zero padding between parameters may coincide.
  int64_t bn = 0;
  for (const auto& s : a->params().specs())
    if (s.kind == ParamKind::BnWeight || s.kind == ParamKind::BnBias) bn += s.numel();
  EXPECT_EQ(same, bn + floats - a->param_count());
  // Re-initialising restores the running statistics too.
  a->params().states().fill(3.0f);
  a->init(123);
  const ParamBuffer& pb = a->params();
  EXPECT_EQ(pb.state(pb.find_state("bn1.running_mean"))[0], 0.0f);
  EXPECT_EQ(pb.state(pb.find_state("bn1.running_var"))[0], 1.0f);
}

TEST(Init, TorchvisionStatistics) {
  auto m = Model::create(cfg("resnet18"));  // 3×32×32, 10 classes (ModelConfig defaults)
  m->init(42);
  const ParamBuffer& pb = m->params();
  // Kaiming normal, fan_out: layer3.0.conv2 is [256, 256, 3, 3], std = sqrt(2 / (256·9)).
  Stats s = stats_of(pb.param(pb.find("layer3.0.conv2.weight")));
  const double want = std::sqrt(2.0 / (256 * 9));
  EXPECT_NEAR(s.stddev, want, 0.01 * want);  // 589824 samples: relative s.e. of std ≈ 0.1%
  EXPECT_NEAR(s.mean, 0.0, 0.01 * want);
  // conv1 [64, 3, 7, 7]: fan_out = 64·49
  s = stats_of(pb.param(pb.find("conv1.weight")));
  EXPECT_NEAR(s.stddev, std::sqrt(2.0 / (64 * 49)), 0.05 * std::sqrt(2.0 / (64 * 49)));
  // fc [10, 512]: U(−1/√512, 1/√512), std = bound/√3; bias with the same bound.
  const double bound = 1.0 / std::sqrt(512.0);
  s = stats_of(pb.param(pb.find("fc.weight")));
  EXPECT_LE(s.maxabs, bound);
  EXPECT_NEAR(s.stddev, bound / std::sqrt(3.0), 0.05 * bound);
  EXPECT_LE(stats_of(pb.param(pb.find("fc.bias"))).maxabs, bound);
  // BN: weight 1, bias 0.
  s = stats_of(pb.param(pb.find("layer2.1.bn1.weight")));
  EXPECT_EQ(s.mean, 1.0);
  EXPECT_EQ(s.stddev, 0.0);
  EXPECT_EQ(stats_of(pb.param(pb.find("layer2.1.bn1.bias"))).maxabs, 0.0);
}

TEST(Init, LenetConvBiasUsesConvFanIn) {
  ModelConfig c = cfg("lenet");
  c.in_channels = 1, c.height = c.width = 28;
  auto m = Model::create(c);
  m->init(5);
  const ParamBuffer& pb = m->params();
  const Stats s = stats_of(pb.param(pb.find("conv2.bias")));  // fan_in 6·5·5 = 150
  EXPECT_LE(s.maxabs, 1.0 / std::sqrt(150.0));
  EXPECT_GT(s.maxabs, 0.0);
}
