// What every mode shares (src/train/mode.cpp, shared_step.cpp, running_stats.cpp): the mode's names, the
// one augmentation seed, the weights of the batch-norm statistics' average, and the per-step plumbing:
// injected failures and overflows, the backward loss scale, the overflow verdict, the compute clock.
#include <gtest/gtest.h>

#include <cmath>

#include "hetrain/error.hpp"
#include "hetrain/precision.hpp"
#include "train/mode.hpp"
#include "train/running_stats.hpp"
#include "train/shared_step.hpp"

using namespace hetrain;
using namespace hetrain::train;

TEST(Mode, NamesRoundTripAndOtherTextIsRefused) {
  for (Mode m : {Mode::Sync, Mode::Async, Mode::Hybrid}) EXPECT_EQ(parse_mode(mode_name(m)), m);
  EXPECT_FALSE(mode_named("Sync").has_value());
  try {
    parse_mode("elastic");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("--mode must be sync, async or hybrid, got 'elastic'"), std::string::npos)
        << e.message();
  }
  EXPECT_FALSE(is_elastic(Mode::Sync));
  EXPECT_TRUE(is_elastic(Mode::Async));
  EXPECT_TRUE(is_elastic(Mode::Hybrid));
}

// Checkpoints of one mode resume in another with the same augmentations only while this value stays: a
// change here changes every augmented run.
TEST(AugmentationSeed, IsPinned) {
  EXPECT_EQ(augmentation_seed(1, 0), 0x9e3779b97f4a7c15ull);
  EXPECT_EQ(augmentation_seed(1, 2), 0x9e3779b97f4a7c15ull + 2000006ull);
  EXPECT_EQ(augmentation_seed(3, 1), 3ull * 0x9e3779b97f4a7c15ull + 1000003ull);
  EXPECT_NE(augmentation_seed(1, 1), augmentation_seed(2, 1));
}

TEST(RunningStatsWeight, IsTheShareOfTheLastStepsSamples) {
  EXPECT_EQ(running_stats_weight(16, 32), 0.5);
  EXPECT_EQ(running_stats_weight(5, 64), 5.0 / 64.0);
  EXPECT_EQ(running_stats_weight(0, 32), 0.0) << "a replica that trained nothing adds nothing";
  EXPECT_EQ(running_stats_weight(0, 0), 0.0);
  // Equal shares give exactly the plain mean the asynchronous modes used before the rule was shared.
  EXPECT_EQ(running_stats_weight(16, 48), 1.0 / 3.0);
  EXPECT_EQ(running_stats_weight(24, 24 * 7), 1.0 / 7.0);
}

TEST(InjectedFailure, ThrowsOnlyOnItsRankAndStep) {
  train::Setup s;
  s.fail_rank = 1, s.fail_step = 3;
  EXPECT_NO_THROW(check_injected_failure(s, 0, 3, "step"));
  EXPECT_NO_THROW(check_injected_failure(s, 1, 2, "step"));
  try {
    check_injected_failure(s, 1, 3, "local step");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "failure injected by --debug-fail-at at local step 3");
  }
}

TEST(BackwardScale, IsTheFp16ScaleOrAnInjectedInfinity) {
  train::Setup s;
  EXPECT_EQ(backward_scale(s, 0, 0).rank_scale, 1.0);
  EXPECT_EQ(backward_scale(s, 0, 0).loss_scale, 1.0f);
  s.precision = Precision::FP16;
  s.loss_scaler = LossScaler(true);
  EXPECT_EQ(backward_scale(s, 0, 0).rank_scale, 65536.0);
  EXPECT_EQ(backward_scale(s, 0, 0).loss_scale, 65536.0f);
  s.overflow_rank = 2, s.overflow_step = 5;
  const BackwardScale injected = backward_scale(s, 2, 5);
  EXPECT_TRUE(std::isinf(injected.loss_scale));
  EXPECT_EQ(injected.rank_scale, 65536.0) << "the reduction still divides the real scale out";
  EXPECT_FALSE(std::isinf(backward_scale(s, 2, 4).loss_scale));
}

TEST(SkipForOverflow, Fp16SkipsAndHalvesWithoutFp16TheRunEnds) {
  LossScaler fp16(true);
  EXPECT_FALSE(skip_for_overflow(fp16, 0, "step 1", true, false));
  EXPECT_TRUE(skip_for_overflow(fp16, 12, "step 2", true, false));
  EXPECT_EQ(fp16.scale(), 32768);
  LossScaler fp32(false);
  EXPECT_THROW(skip_for_overflow(fp32, 3, "step 7", /*agreed=*/true, false), AgreedError);
  try {
    skip_for_overflow(fp32, 3, "rank 1, local step 7", /*agreed=*/false, false);
    FAIL() << "no error";
  } catch (const AgreedError&) {
    FAIL() << "one rank's verdict is not agreed";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("rank 1, local step 7"), std::string::npos) << e.message();
  }
}

TEST(ComputeClock, TheFirstStepIsSetUpAndNotEmulated) {
  train::Setup s;  // no --emulate-speed: the emulator adds nothing
  ComputeClock first;
  const double t = first.stop(s, 0, 0, /*first_step=*/true);
  EXPECT_TRUE(first.setup());
  EXPECT_GE(t, 0.0);
  ComputeClock later;
  EXPECT_GE(later.stop(s, 0, 1, /*first_step=*/false, /*not_compute=*/0.0), 0.0);
  EXPECT_FALSE(later.setup()) << "no convolution kernels were made";
}
