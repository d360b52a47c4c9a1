// test/gpu/sgd_update_test.cpp — the fused SGD step: its twin against hand-computed values (runs
// everywhere), then the kernel against the twin over several steps (atol 1e-6 + rtol 1e-5: the twin's
// operation order is not optim::Sgd's), and optim::Sgd on the GPU against the CPU, bit for bit.
#include <gtest/gtest.h>

#include <memory>

#include "gpu_test_util.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "twins.hpp"

using namespace hetrain;
using gpu_test::expect_close;

// p = 1, grad = 2, v = 0.5, lr 0.1, μ 0.9, wd 0.01, scale 0.5:
//   g = 0.5·2 + 0.01·1 = 1.01;  v = 0.9·0.5 + 1.01 = 1.46
//   plain: p = 1 − 0.1·1.46 = 0.854;  Nesterov: step = 1.01 + 0.9·1.46 = 2.324, p = 0.7676
//   mask 0: g = 1, v = 1.45, p = 0.855;  μ = 0: p = 1 − 0.101 = 0.899, v untouched
TEST(SgdTwin, HandComputed) {
  cuda::SgdStep s;
  s.lr = 0.1f, s.momentum = 0.9f, s.weight_decay = 0.01f, s.grad_scale = 0.5f;
  const float grad[2] = {2.0f, 2.0f}, mask[2] = {1.0f, 0.0f};
  float p[2] = {1.0f, 1.0f}, v[2] = {0.5f, 0.5f};
  gpu_test::sgd_update_twin(p, v, grad, mask, nullptr, 2, s);
  EXPECT_NEAR(p[0], 0.854f, 1e-6);
  EXPECT_NEAR(v[0], 1.46f, 1e-6);
  EXPECT_NEAR(p[1], 0.855f, 1e-6);
  EXPECT_NEAR(v[1], 1.45f, 1e-6);

  s.nesterov = true;
  p[0] = 1.0f, v[0] = 0.5f;
  gpu_test::sgd_update_twin(p, v, grad, nullptr, nullptr, 1, s);
  EXPECT_NEAR(p[0], 0.7676f, 1e-6);
  EXPECT_NEAR(v[0], 1.46f, 1e-6);

  s.nesterov = false, s.momentum = 0.0f;
  p[0] = 1.0f, v[0] = 0.5f;
  gpu_test::sgd_update_twin(p, v, grad, nullptr, nullptr, 1, s);
  EXPECT_NEAR(p[0], 0.899f, 1e-6);
  EXPECT_EQ(v[0], 0.5f);

  // the group's elements step at group_lr 0.2: p = 1 − 0.2·1.01 = 0.798; the other keeps lr 0.1
  const float group[2] = {1.0f, 0.0f};
  s.group_lr = 0.2f;
  p[0] = p[1] = 1.0f, v[0] = v[1] = 0.5f;
  gpu_test::sgd_update_twin(p, v, grad, nullptr, group, 2, s);
  EXPECT_NEAR(p[0], 0.798f, 1e-6);
  EXPECT_NEAR(p[1], 0.899f, 1e-6);
}

TEST(CudaSgd, ParityOverSteps) {
  HT_REQUIRE_GPU();
  struct Case {
    float momentum;
    bool nesterov;
    float wd;
    bool mask;
    float scale;
    bool group;  // every third element at another rate
  };
  const Case cases[] = {{0.9f, false, 5e-4f, false, 1.0f, false},
                        {0.9f, true, 1e-4f, true, 0.25f, true},
                        {0.0f, false, 5e-4f, true, 0.75f, true},
                        {0.5f, false, 0.0f, false, 3.0f, false}};
  const int64_t n = 100003;  // not a multiple of the block
  for (const Case& c : cases) {
    SCOPED_TRACE("momentum=" + std::to_string(c.momentum) + " nesterov=" + std::to_string(c.nesterov));
    auto p = gpu_test::random_floats(n, 21), v = gpu_test::random_floats(n, 22, -0.1f, 0.1f);
    std::vector<float> mask(n), group(n);
    for (int64_t i = 0; i < n; ++i) mask[i] = (i % 7 == 0) ? 0.0f : 1.0f;  // "biases and BN": no decay
    for (int64_t i = 0; i < n; ++i) group[i] = (i % 3 == 0) ? 1.0f : 0.0f;
    cuda::DeviceBuffer<float> dp(n), dv(n), dg(n), dmask(n), dgroup(n);
    dp.upload(p);
    dv.upload(v);
    dmask.upload(mask);
    dgroup.upload(group);
    const float* twin_group = c.group ? group.data() : nullptr;
    const float* device_group = c.group ? dgroup.data() : nullptr;
    cuda::SgdStep s;
    s.momentum = c.momentum, s.nesterov = c.nesterov, s.weight_decay = c.wd, s.grad_scale = c.scale;
    for (int step = 0; step < 3; ++step) {
      s.lr = 0.1f / (step + 1);
      s.group_lr = 0.05f * (step + 1);
      auto g = gpu_test::random_floats(n, 30 + step);
      dg.upload(g);
      gpu_test::sgd_update_twin(p.data(), v.data(), g.data(), c.mask ? mask.data() : nullptr, twin_group, n, s);
      cuda::sgd_update(dp.data(), c.momentum ? dv.data() : nullptr, dg.data(), c.mask ? dmask.data() : nullptr,
                       device_group, n, s,
                       nullptr);
    }
    expect_close("param", dp.download(), p, 1e-6, 1e-5);
    expect_close("velocity", dv.download(), v, 1e-6, 1e-5);
  }
}

TEST(CudaSgd, RejectsMissingVelocity) {
  HT_REQUIRE_GPU();
  cuda::DeviceBuffer<float> p(4), g(4);
  cuda::SgdStep s;
  s.momentum = 0.9f;
  EXPECT_THROW(cuda::sgd_update(p.data(), nullptr, g.data(), nullptr, nullptr, 4, s, nullptr), Error);
}

// optim::Sgd on the GPU (this kernel) against optim::Sgd on the CPU, bit for bit: in a job mixing CPU and
// GPU ranks both apply the same reduced gradient, and the replicas must stay identical.
TEST(CudaSgdUpdate, OptimizerMatchesCpuBitForBit) {
  HT_REQUIRE_GPU();
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "momentum");
    auto make = [] {
      auto pb = std::make_unique<nn::ParamBuffer>();
      pb->declare("w", {1000, 37}, nn::ParamKind::ConvWeight);
      pb->declare("b", {1000}, nn::ParamKind::Bias);
      pb->finalize();
      auto v = gpu_test::random_floats(size_t(pb->count()), 5), g = gpu_test::random_floats(size_t(pb->count()), 6);
      std::copy(v.begin(), v.end(), pb->values().data());
      std::copy(g.begin(), g.end(), pb->grads().data());
      return pb;
    };
    auto cpu = make(), gpu = make();
    gpu->to(Device::CUDA);
    optim::SgdConfig c;
    c.momentum = 0.9f, c.nesterov = nesterov, c.weight_decay = 5e-4f, c.decay_bn_and_bias = false;
    optim::Sgd cpu_sgd(*cpu, c), gpu_sgd(*gpu, c);
    for (int step = 0; step < 3; ++step) {
      cpu_sgd.step(*cpu, 0.1f / float(step + 1));
      gpu_sgd.step(*gpu, 0.1f / float(step + 1));
    }
    // YOLOv5's warm-up: the bias group at its own rate, the momentum below the configured one.
    optim::StepRates warm;
    warm.lr = 0.01f, warm.bias_lr = 0.07f, warm.momentum = 0.85f;
    cpu_sgd.step(*cpu, warm);
    gpu_sgd.step(*gpu, warm);
    Tensor back = gpu->values().to(Device::CPU);
    expect_close("parameters", std::vector<float>(back.data(), back.data() + back.numel()),
                 std::vector<float>(cpu->values().data(), cpu->values().data() + cpu->count()), 0, 0);
  }
}
