// SGD against hand-computed PyTorch numbers; learning-rate schedule values.
#include <gtest/gtest.h>

#include <cmath>

#include "hetrain/error.hpp"
#include "hetrain/optim.hpp"

using namespace hetrain;
using namespace hetrain::nn;
using namespace hetrain::optim;

namespace {
// w: one linear weight element, b: one bias element (at float 64 of the flat buffer: ParamBuffer aligns).
struct Fixture {
  ParamBuffer pb;
  Fixture() {
    pb.declare("w", {1}, ParamKind::LinearWeight);
    pb.declare("b", {1}, ParamKind::Bias);
    pb.finalize();
    w() = 1.0f;
    b() = 2.0f;
  }
  float& w() { return pb.values().data()[pb.specs()[0].offset]; }
  float& b() { return pb.values().data()[pb.specs()[1].offset]; }
  void set_grads(float g) {
    pb.grads().data()[pb.specs()[0].offset] = g;
    pb.grads().data()[pb.specs()[1].offset] = g;
  }
  void two_steps(const SgdConfig& c, float out[2][2]) {
    Sgd sgd(pb, c);
    for (int s = 0; s < 2; ++s) {
      set_grads(0.5f);
      sgd.step(pb, 0.5f);
      out[s][0] = w();
      out[s][1] = b();
    }
  }
};
SgdConfig sgd_cfg(float mu, bool nesterov, float wd, bool decay_all) {
  SgdConfig c;
  c.momentum = mu, c.nesterov = nesterov, c.weight_decay = wd, c.decay_bn_and_bias = decay_all;
  return c;
}
}  // namespace

// lr 0.5, grad 0.5 every step, wd 0.1, μ 0.9; w starts at 1, b at 2.
TEST(Sgd, MomentumWithWeightDecay) {
  Fixture f;
  float p[2][2];
  f.two_steps(sgd_cfg(0.9f, false, 0.1f, true), p);
  // w: d = .5+.1·1 = .6, v = .6, w = 1−.3 = .7;  d = .5+.07 = .57, v = .54+.57 = 1.11, w = .7−.555 = .145
  EXPECT_NEAR(p[0][0], 0.7, 1e-6);
  EXPECT_NEAR(p[1][0], 0.145, 1e-6);
  // b: d = .5+.2 = .7, b = 2−.35 = 1.65;  d = .5+.165 = .665, v = .63+.665 = 1.295, b = 1.65−.6475 = 1.0025
  EXPECT_NEAR(p[0][1], 1.65, 1e-6);
  EXPECT_NEAR(p[1][1], 1.0025, 1e-6);
}

TEST(Sgd, NesterovAndNoDecayOnBiases) {
  Fixture f;
  float p[2][2];
  f.two_steps(sgd_cfg(0.9f, true, 0.1f, false), p);
  // w: d = .6, v = .6, w = 1−.5·(.6+.54) = .43;  d = .543, v = 1.083, w = .43−.5·(.543+.9747) = −.32885
  EXPECT_NEAR(p[0][0], 0.43, 1e-6);
  EXPECT_NEAR(p[1][0], -0.32885, 1e-6);
  // b (no decay): d = .5, v = .5, b = 2−.5·(.5+.45) = 1.525;  v = .95, b = 1.525−.5·(.5+.855) = .8475
  EXPECT_NEAR(p[0][1], 1.525, 1e-6);
  EXPECT_NEAR(p[1][1], 0.8475, 1e-6);
}

TEST(Sgd, PlainSgd) {
  Fixture f;
  float p[2][2];
  f.two_steps(sgd_cfg(0.0f, false, 0.0f, true), p);
  EXPECT_NEAR(p[0][0], 0.75, 1e-6);
  EXPECT_NEAR(p[1][0], 0.5, 1e-6);
  EXPECT_NEAR(p[1][1], 1.5, 1e-6);
}

TEST(Sgd, MomentumBufferIsFlatAndCheckpointable) {
  Fixture f;
  Sgd sgd(f.pb, sgd_cfg(0.9f, false, 0.0f, true));
  EXPECT_EQ(sgd.momentum_buffer().numel(), f.pb.count());
  f.set_grads(1.0f);
  sgd.step(f.pb, 0.1f);
  EXPECT_FLOAT_EQ(sgd.momentum_buffer()[0], 1.0f);
  // Restoring a saved buffer continues the run: v = .9·3 + 1 = 3.7
  sgd.momentum_buffer()[0] = 3.0f;
  sgd.step(f.pb, 0.1f);
  EXPECT_FLOAT_EQ(sgd.momentum_buffer()[0], 3.7f);
  EXPECT_THROW(Sgd(f.pb, sgd_cfg(0.0f, true, 0.0f, true)), Error);  // nesterov without momentum
}

TEST(LrSchedule, WarmupThenCosine) {
  ScheduleConfig c;
  c.base_lr = 0.1f, c.linear_scaling = true, c.warmup_steps = 10, c.decay = "cosine";
  LrSchedule s(c, 512, 110);  // peak 0.1·512/256 = 0.2
  EXPECT_FLOAT_EQ(s.peak_lr(), 0.2f);
  EXPECT_FLOAT_EQ(s.at(0), 0.02f);
  EXPECT_FLOAT_EQ(s.at(4), 0.1f);
  EXPECT_FLOAT_EQ(s.at(9), 0.2f);
  EXPECT_FLOAT_EQ(s.at(10), 0.2f);
  EXPECT_NEAR(s.at(60), 0.1f, 1e-7);  // cosine midpoint
  EXPECT_NEAR(s.at(35), 0.1f * (1 + std::cos(M_PI / 4)), 1e-7);
  EXPECT_NEAR(s.at(110), 0.0f, 1e-9);
  EXPECT_NEAR(s.at(500), 0.0f, 1e-9);
  for (int64_t t = 11; t < 110; ++t) EXPECT_LT(s.at(t), s.at(t - 1));
}

TEST(LrSchedule, StepAndConstant) {
  ScheduleConfig c;
  c.base_lr = 0.1f, c.decay = "step", c.milestones = {30, 60}, c.gamma = 0.1f;
  LrSchedule s(c, 128, 90);
  EXPECT_FLOAT_EQ(s.peak_lr(), 0.1f);  // no linear scaling
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);
  EXPECT_FLOAT_EQ(s.at(29), 0.1f);
  EXPECT_FLOAT_EQ(s.at(30), 0.01f);
  EXPECT_FLOAT_EQ(s.at(59), 0.01f);
  EXPECT_FLOAT_EQ(s.at(60), 0.001f);
  c.decay = "constant", c.warmup_steps = 4;
  LrSchedule k(c, 128, 90);
  EXPECT_FLOAT_EQ(k.at(0), 0.025f);
  EXPECT_FLOAT_EQ(k.at(3), 0.1f);
  EXPECT_FLOAT_EQ(k.at(89), 0.1f);
}

TEST(LrSchedule, RejectsBadConfig) {
  ScheduleConfig c;
  c.decay = "linear";
  EXPECT_THROW(LrSchedule(c, 256, 10), Error);
  c.decay = "cosine", c.warmup_steps = 20;
  EXPECT_THROW(LrSchedule(c, 256, 10), Error);
  c.warmup_steps = 0;
  EXPECT_THROW(LrSchedule(c, 0, 10), Error);
  c.decay = "step", c.milestones = {5, 3};
  EXPECT_THROW(LrSchedule(c, 256, 10), Error);
}

// YOLOv5's warm-up over 4 steps (f = 1/4 … 1): the bias rate 0.1·(1−f) + lr, the momentum 0.8 + 0.137·f;
// after the warm-up both are the plain ones.
TEST(LrSchedule, Yolov5WarmupMovesTheBiasRateAndTheMomentum) {
  ScheduleConfig c;
  c.base_lr = 0.01f, c.warmup_steps = 4, c.decay = "constant", c.warmup_bias_lr = 0.1f, c.warmup_momentum = 0.8f;
  LrSchedule s(c, 64, 10);
  const StepRates first = s.rates(0, 0.937f), last = s.rates(3, 0.937f), after = s.rates(4, 0.937f);
  EXPECT_FLOAT_EQ(first.lr, 0.0025f);
  EXPECT_FLOAT_EQ(first.bias_lr, 0.075f + 0.0025f);
  EXPECT_FLOAT_EQ(first.momentum, 0.8f + 0.137f * 0.25f);
  EXPECT_FLOAT_EQ(last.lr, 0.01f);
  EXPECT_FLOAT_EQ(last.bias_lr, 0.01f);
  EXPECT_FLOAT_EQ(last.momentum, 0.937f);
  EXPECT_EQ(after.bias_lr, after.lr);
  EXPECT_EQ(after.momentum, 0.937f);
  for (int64_t t = 1; t < 4; ++t) EXPECT_LT(s.rates(t, 0.937f).bias_lr, s.rates(t - 1, 0.937f).bias_lr);
  // Without the YOLOv5 fields every rate is the schedule's and the optimizer's.
  c.warmup_bias_lr = 0.0f, c.warmup_momentum = -1.0f;
  LrSchedule plain(c, 64, 10);
  EXPECT_EQ(plain.rates(0, 0.9f).bias_lr, plain.at(0));
  EXPECT_EQ(plain.rates(0, 0.9f).momentum, 0.9f);
  c.warmup_momentum = 1.0f;
  EXPECT_THROW(LrSchedule(c, 64, 10), Error);
}

// The bias group (kind Bias or BnBias) steps at bias_lr, the rest at lr, both with the step's momentum.
// lr 0.5 / bias lr 1.0, μ 0.5, grad 0.5, no decay: w = 1 − .5·.5 = .75, b = 2 − 1·.5 = 1.5; then
// v = .25 + .5 = .75: w = .75 − .375 = .375, b = 1.5 − .75 = .75.
TEST(Sgd, BiasGroupStepsAtItsOwnRate) {
  Fixture f;
  Sgd sgd(f.pb, sgd_cfg(0.9f, false, 0.0f, true));
  StepRates r;
  r.lr = 0.5f, r.bias_lr = 1.0f, r.momentum = 0.5f;
  for (int s = 0; s < 2; ++s) {
    f.set_grads(0.5f);
    sgd.step(f.pb, r);
    EXPECT_FLOAT_EQ(f.w(), s == 0 ? 0.75f : 0.375f);
    EXPECT_FLOAT_EQ(f.b(), s == 0 ? 1.5f : 0.75f);
  }
  r.momentum = 0.0f;
  EXPECT_NO_THROW(sgd.step(f.pb, r));
  Sgd nesterov(f.pb, sgd_cfg(0.9f, true, 0.0f, true));
  EXPECT_THROW(nesterov.step(f.pb, r), Error);  // Nesterov without momentum
}

// YOLOv5's ModelEMA: d = decay·(1 − exp(−updates/ramp)); avg ← d·avg + (1 − d)·model over the values and the
// running statistics; exchanging twice gives both back.
TEST(WeightAverage, FollowsTheModelWithARampedDecay) {
  ParamBuffer pb;
  pb.declare("w", {2}, ParamKind::ConvWeight);
  pb.declare_state("bn.running_mean", {1}, 0.0f);
  pb.finalize();
  pb.values()[0] = 1.0f, pb.values()[1] = -1.0f;
  WeightAverage avg(pb, 0.5f, 1.0f);
  EXPECT_EQ(avg.updates(), 0);
  EXPECT_FLOAT_EQ(avg.decay_at(1), float(0.5 * (1 - std::exp(-1.0))));
  pb.values()[0] = 3.0f, pb.states()[0] = 2.0f;
  avg.update(pb);
  const float d = avg.decay_at(1);
  EXPECT_EQ(avg.updates(), 1);
  EXPECT_FLOAT_EQ(avg.values()[0], d * 1.0f + (1 - d) * 3.0f);
  EXPECT_FLOAT_EQ(avg.values()[1], -1.0f);
  EXPECT_FLOAT_EQ(avg.states()[0], (1 - d) * 2.0f);
  const float averaged = avg.values()[0];
  {
    AverageSwappedIn in(avg, pb);
    EXPECT_FLOAT_EQ(pb.values()[0], averaged);
    EXPECT_FLOAT_EQ(avg.values()[0], 3.0f);
  }
  EXPECT_FLOAT_EQ(pb.values()[0], 3.0f);
  EXPECT_FLOAT_EQ(avg.values()[0], averaged);
  EXPECT_THROW(WeightAverage(pb, 1.0f, 2000.0f), Error);
  EXPECT_THROW(WeightAverage(pb, 0.9999f, 0.0f), Error);
}
