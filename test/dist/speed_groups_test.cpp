// --groups speed: ranks of similar measured speed share a group (dist::speed_groups, dist/elastic.hpp).
#include <gtest/gtest.h>

#include <vector>

#include "hetrain/dist/elastic.hpp"

using hetrain::dist::speed_groups;

TEST(SpeedGroups, EmulatedSpeedsOfTheBenchmark) {
  // {1, 1, 0.5, 0.25} at 1000 samples/s: the two fast ranks together, each slow one alone.
  EXPECT_EQ(speed_groups({1000, 1000, 500, 250}, 0.7), (std::vector<int>{0, 0, 2, 3}));
  // Measured rates are noisy: within 30% of the group's fastest is the same group.
  EXPECT_EQ(speed_groups({980, 1010, 505, 470}, 0.7), (std::vector<int>{0, 0, 2, 2}));
}

TEST(SpeedGroups, GroupIdIsTheLowestRankAndOrderDoesNotMatter) {
  EXPECT_EQ(speed_groups({250, 1000, 500, 1000}, 0.7), (std::vector<int>{0, 1, 2, 1}));
  EXPECT_EQ(speed_groups({500, 100, 510, 90, 495}, 0.7), (std::vector<int>{0, 1, 0, 1, 0}));
}

TEST(SpeedGroups, AGroupIsBoundedByItsFastestMember) {
  // A chain of small steps does not make one group: each rank is compared with the fastest of its group.
  EXPECT_EQ(speed_groups({1000, 800, 640, 512}, 0.7), (std::vector<int>{0, 0, 2, 2}));
  EXPECT_EQ(speed_groups({1000, 800, 640, 512}, 0.5), (std::vector<int>{0, 0, 0, 0}));
}

TEST(SpeedGroups, EdgeCases) {
  EXPECT_EQ(speed_groups({}, 0.7), std::vector<int>{});
  EXPECT_EQ(speed_groups({42}, 0.7), std::vector<int>{0});
  EXPECT_EQ(speed_groups({7, 7, 7}, 1.0), (std::vector<int>{0, 0, 0}));        // equal speeds, within = 1
  EXPECT_EQ(speed_groups({1, 2, 4, 8}, 1.0), (std::vector<int>{0, 1, 2, 3}));  // within = 1: only equals
  EXPECT_EQ(speed_groups({0, 0, 100}, 0.7), (std::vector<int>{0, 0, 2}));      // ranks that measured nothing
}
