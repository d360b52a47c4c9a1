// A short training run: resnet20 learns a small synthetic dataset (class = one of 4 fixed random
// templates plus noise), so the loss must fall well below its starting value within 25 steps.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hetrain/nn.hpp"
#include "hetrain/ops.hpp"
#include "hetrain/optim.hpp"
#include "test_util.hpp"

using namespace hetrain;
using namespace hetrain::nn;

TEST(Training, Resnet20LearnsSyntheticData) {
  const int N = 32, C = 3, HW = 16, K = 4, steps = 25;
  ModelConfig cfg;
  cfg.name = "resnet20", cfg.height = cfg.width = HW, cfg.num_classes = K;
  auto m = Model::create(cfg);
  m->init(2024);

  Tensor templates({K, C, HW, HW}), x({N, C, HW, HW}), noise({N, C, HW, HW});
  test::fill_uniform(templates, 1);
  test::fill_uniform(noise, 2);
  std::vector<int32_t> labels(N);
  const int64_t plane = int64_t(C) * HW * HW;
  for (int n = 0; n < N; ++n) {
    labels[n] = n % K;
    for (int64_t i = 0; i < plane; ++i) x[n * plane + i] = templates[labels[n] * plane + i] + 0.5f * noise[n * plane + i];
  }

  optim::SgdConfig sc;
  sc.momentum = 0.9f, sc.weight_decay = 5e-4f;
  optim::Sgd sgd(m->params(), sc);
  Tensor probs({N, K}), dlogits({N, K});
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    m->params().grads().zero();
    Tensor logits = m->forward(x, true);
    losses.push_back(ops::cpu::softmax_xent_forward(probs.data(), logits.data(), labels.data(), N, K, 0.0f));
    ops::cpu::softmax_xent_backward(dlogits.data(), probs.data(), labels.data(), N, K, 0.0f, 1.0f / N);
    m->backward(dlogits);
    sgd.step(m->params(), 0.05f);
  }
  for (float l : losses) ASSERT_TRUE(std::isfinite(l));
  EXPECT_GT(losses.front(), 0.5f * std::log(float(K)));  // a fresh model is not already trained
  EXPECT_LT(losses.back(), 0.3f * losses.front()) << "first loss " << losses.front() << ", last " << losses.back();
}
