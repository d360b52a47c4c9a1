// Batch norm: running statistics update (momentum 0.1, unbiased variance) and eval mode using them.
#include <gtest/gtest.h>

#include <cmath>

#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "nn/batchnorm2d.hpp"
#include "test_util.hpp"

using namespace hetrain;
using namespace hetrain::nn;

TEST(BatchNorm, RunningStatsAndEvalMode) {
  ParamBuffer pb;
  BatchNorm2d bn(pb, "bn", 1);
  pb.finalize();
  pb.param(pb.find("bn.weight"))[0] = 2.0f;
  pb.param(pb.find("bn.bias"))[0] = 1.0f;
  // x [2, 1, 1, 2] = {1, 2, 3, 6}: mean 3, biased var 3.5, unbiased var 14/3.
  Tensor x({2, 1, 1, 2});
  const float v[] = {1, 2, 3, 6};
  for (int i = 0; i < 4; ++i) x[i] = v[i];
  Tensor y = bn.forward(x, true);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (v[i] - 3.0) / std::sqrt(3.5 + 1e-5) * 2 + 1, 1e-5);
  const float rm = pb.state(pb.find_state("bn.running_mean"))[0];
  const float rv = pb.state(pb.find_state("bn.running_var"))[0];
  EXPECT_NEAR(rm, 0.1 * 3.0, 1e-6);
  EXPECT_NEAR(rv, 0.9 * 1.0 + 0.1 * 14.0 / 3.0, 1e-6);

  y = bn.forward(x, false);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (v[i] - rm) / std::sqrt(rv + 1e-5) * 2 + 1, 1e-5);
  // No backward through an eval-mode forward.
  EXPECT_THROW(bn.backward(y), Error);
}

TEST(BatchNorm, ModelEvalIsPerSample) {
  ModelConfig c;
  c.name = "resnet20", c.height = c.width = 8;
  auto m = Model::create(c);
  m->init(3);
  Tensor x({4, 3, 8, 8});
  test::fill_uniform(x, 4);
  Tensor train_out = m->forward(x, true).clone();  // updates the running statistics
  const ParamBuffer& pb = m->params();
  EXPECT_NE(pb.state(pb.find_state("bn1.running_mean"))[0], 0.0f);

  Tensor eval_all = m->forward(x, false).clone();
  Tensor eval_one = m->forward(x.slice0(1, 2), false).clone();  // sample 1 on its own
  double diff_train = 0;
  for (int k = 0; k < 10; ++k) {
    EXPECT_NEAR(eval_one[k], eval_all[10 + k], 1e-5) << "eval output depends on the rest of the batch";
    diff_train += std::fabs(eval_all[10 + k] - train_out[10 + k]);
  }
  EXPECT_GT(diff_train, 1e-3) << "eval mode should not use batch statistics";
  // Eval mode leaves the running statistics alone.
  Tensor before = pb.states().clone();
  m->forward(x, false);
  for (int64_t i = 0; i < before.numel(); ++i) ASSERT_EQ(before[i], pb.states()[i]);
}
