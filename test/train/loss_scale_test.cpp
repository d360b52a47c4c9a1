// Dynamic loss scaling (src/train/loss_scale.cpp) and the precision names (src/core/precision.cpp): the
// scale halves on an overflow and the step is skipped, doubles after the growth interval of good steps,
// gives up at the smallest scale, and an inactive scaler (every precision but fp16) never scales and
// turns every overflow into the divergence error.
#include <gtest/gtest.h>

#include "hetrain/error.hpp"
#include "hetrain/precision.hpp"
#include "train/loss_scale.hpp"

using namespace hetrain;
using namespace hetrain::train;
using Verdict = LossScaler::Verdict;

TEST(LossScaler, OverflowHalvesTheScaleAndSkipsTheStep) {
  LossScaler s(true);
  EXPECT_EQ(s.scale(), 65536);
  EXPECT_EQ(s.update(false), Verdict::Apply);
  EXPECT_EQ(s.update(true), Verdict::Skip);
  EXPECT_EQ(s.scale(), 32768);
  EXPECT_EQ(s.update(true), Verdict::Skip);
  EXPECT_EQ(s.scale(), 16384);
  EXPECT_EQ(s.skipped(), 2);
  EXPECT_EQ(s.good_steps(), 0);
}

TEST(LossScaler, GrowsAfterTheIntervalOfGoodStepsInARow) {
  LossScaler::Config c;
  c.initial = 1024, c.growth_interval = 3;
  LossScaler s(true, c);
  EXPECT_EQ(s.update(false), Verdict::Apply);
  EXPECT_EQ(s.update(false), Verdict::Apply);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.update(true), Verdict::Skip);  // an overflow restarts the count
  EXPECT_EQ(s.scale(), 512);
  for (int k = 0; k < 2; ++k) EXPECT_EQ(s.update(false), Verdict::Apply);
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.update(false), Verdict::Apply);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.good_steps(), 0);
}

// A run that never overflows stops growing the scale at its cap instead of doubling it to Inf.
TEST(LossScaler, GrowthStopsAtTheLargestScale) {
  LossScaler::Config c;
  c.initial = 1024, c.growth_interval = 1, c.max_scale = 4096;
  LossScaler s(true, c);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(s.update(false), Verdict::Apply);
  EXPECT_EQ(s.scale(), 4096);
  EXPECT_EQ(LossScaler::Config{}.max_scale, 16777216.0);
  s.restore(8192, 0);  // a checkpoint written before the cap existed
  EXPECT_EQ(s.scale(), 4096);
}

TEST(LossScaler, GivesUpBelowTheSmallestScale) {
  LossScaler::Config c;
  c.initial = 4, c.min_scale = 1;
  LossScaler s(true, c);
  EXPECT_EQ(s.update(true), Verdict::Skip);  // 2
  EXPECT_EQ(s.update(true), Verdict::Skip);  // 1
  EXPECT_EQ(s.update(true), Verdict::GiveUp);
  EXPECT_EQ(s.scale(), 1);
  const std::string e = nonfinite_gradient_error("step 7", 12, s);
  EXPECT_NE(e.find("step 7: the reduced gradient has 12 NaN/Inf values even at loss scale 1"), std::string::npos) << e;
  EXPECT_NE(e.find("--precision bf16"), std::string::npos) << e;
}

TEST(LossScaler, InactiveNeverScalesAndNeverSkips) {
  LossScaler s(false);
  EXPECT_EQ(s.scale(), 1);
  for (int k = 0; k < 5000; ++k) ASSERT_EQ(s.update(false), Verdict::Apply);
  EXPECT_EQ(s.scale(), 1);
  EXPECT_EQ(s.update(true), Verdict::GiveUp);
  EXPECT_EQ(nonfinite_gradient_error("step 3", 5, s),
            "step 3: the reduced gradient has 5 NaN/Inf values (the loss diverged: lower --lr, add --warmup-epochs, "
            "or check the data)");
}

TEST(LossScaler, RestoresACheckpointedStateAndRefusesANonsenseOne) {
  LossScaler s(true);
  s.restore(2048, 17);
  EXPECT_EQ(s.scale(), 2048);
  EXPECT_EQ(s.good_steps(), 17);
  EXPECT_THROW(s.restore(0.25, 0), Error);
  EXPECT_THROW(s.restore(1024, -1), Error);
  EXPECT_EQ(skipped_step_text("step 4", s), "step 4: FP16 gradient overflow (NaN/Inf after the reduction): step "
                                            "skipped, loss scale now 2048");
}

TEST(Precision, NamesRoundTripAndUnknownNamesAreRefused) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16})
    EXPECT_EQ(parse_precision(precision_name(p), "--precision"), p);
  EXPECT_EQ(parse_precision("BF16", "--precision"), Precision::BF16);
  try {
    parse_precision("fp64", "--precision");
    FAIL() << "fp64 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "--precision: unknown precision 'fp64' (use fp32, tf32, bf16 or fp16)");
  }
  EXPECT_TRUE(is_16bit(Precision::BF16));
  EXPECT_TRUE(is_16bit(Precision::FP16));
  EXPECT_FALSE(is_16bit(Precision::TF32));
}
