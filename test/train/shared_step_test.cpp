// What every mode shares (src/train/mode.cpp, shared_step.cpp, running_stats.cpp): the mode's names, the
// one augmentation seed, and the weights of the batch-norm statistics' average.
#include <gtest/gtest.h>

#include "hetrain/error.hpp"
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
