// The modes' sample choice (src/train/shares.cpp): the synchronous split of a short step, a rank's slice,
// a group member's part of a claim, and the asynchronous modes' positions cut at epoch boundaries.
#include <gtest/gtest.h>

#include <numeric>

#include "train/shares.hpp"

using namespace hetrain::train;

TEST(ScaleSplit, AFullStepKeepsTheSplit) {
  const std::vector<int64_t> split = {5, 0, 27, 32};
  EXPECT_EQ(scale_split(split, 64, 64), split);
}

TEST(ScaleSplit, AShortStepRoundsByLargestRemainderTiesToTheLowerRank) {
  // 64 -> 32: exactly 2.5, 0, 13.5, 16; the half samples go to the lower of the two ranks first.
  EXPECT_EQ(scale_split({5, 0, 27, 32}, 64, 32), (std::vector<int64_t>{3, 0, 13, 16}));
  // 10 samples of a split of 3 equal shares: 3.33 each, the one left over to rank 0.
  EXPECT_EQ(scale_split({4, 4, 4}, 12, 10), (std::vector<int64_t>{4, 3, 3}));
  for (int64_t batch = 0; batch <= 64; ++batch) {
    const std::vector<int64_t> out = scale_split({5, 0, 27, 32}, 64, batch);
    EXPECT_EQ(std::accumulate(out.begin(), out.end(), int64_t(0)), batch);
    EXPECT_EQ(out[1], 0) << "a rank without a share gets none of a short step";
  }
}

TEST(ShareOffset, IsTheSumOfTheLowerRanksShares) {
  const std::vector<int64_t> split = {5, 0, 27, 32};
  EXPECT_EQ(share_offset(split, 0), 0);
  EXPECT_EQ(share_offset(split, 1), 5);
  EXPECT_EQ(share_offset(split, 2), 5);
  EXPECT_EQ(share_offset(split, 3), 32);
}

TEST(MemberShare, MembersTakeConsecutivePartsOfTheClaim) {
  const std::vector<int64_t> batches = {4, 4, 4};
  EXPECT_EQ(member_share(batches, 0, 12).offset, 0);
  EXPECT_EQ(member_share(batches, 1, 12).offset, 4);
  EXPECT_EQ(member_share(batches, 2, 12).count, 4);
}

TEST(MemberShare, AShortLastClaimLeavesTheLastMembersLessOrNone) {
  const std::vector<int64_t> batches = {4, 4, 4};
  EXPECT_EQ(member_share(batches, 1, 6).count, 2);
  EXPECT_EQ(member_share(batches, 2, 6).count, 0);
  EXPECT_EQ(member_share(batches, 2, 6).offset, 6) << "an empty share starts at the claim's end";
  EXPECT_EQ(member_share({7}, 0, 3).count, 3) << "async: a group of one takes what the claim holds";
}

TEST(PartsByEpoch, CutsPositionsAtEpochBoundaries) {
  const std::vector<EpochPart> parts = parts_by_epoch(95, 110, 100);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].epoch, 0);
  EXPECT_EQ(parts[0].position, 95);
  EXPECT_EQ(parts[0].count, 5);
  EXPECT_EQ(parts[1].epoch, 1);
  EXPECT_EQ(parts[1].position, 0);
  EXPECT_EQ(parts[1].count, 100);
  EXPECT_EQ(parts[2].epoch, 2);
  EXPECT_EQ(parts[2].position, 0);
  EXPECT_EQ(parts[2].count, 5);
  EXPECT_TRUE(parts_by_epoch(40, 0, 100).empty());
  const std::vector<EpochPart> inside = parts_by_epoch(140, 20, 100);
  ASSERT_EQ(inside.size(), 1u);
  EXPECT_EQ(inside[0].epoch, 1);
  EXPECT_EQ(inside[0].position, 40);
  EXPECT_EQ(inside[0].count, 20);
}

// Ghost batch norm: a short step keeps every rank's slice at a group boundary of the step; only the step's
// last group is short, at the end of the last rank with samples.
TEST(Shares, ScaledInWholeGroups) {
  const std::vector<int64_t> split = {8, 0, 16, 8};  // groups of 4, B = 32
  EXPECT_EQ(scale_split_in_groups(split, 32, 32, 4), split);
  for (int64_t batch = 1; batch < 32; ++batch) {
    const std::vector<int64_t> got = scale_split_in_groups(split, 32, batch, 4);
    EXPECT_EQ(std::accumulate(got.begin(), got.end(), int64_t(0)), batch) << batch;
    EXPECT_EQ(got[1], 0) << batch;
    int64_t offset = 0;
    size_t last = 0;
    for (size_t r = 0; r < got.size(); ++r) {
      if (got[r] > 0) EXPECT_EQ(offset % 4, 0) << "rank " << r << " starts inside a group at batch " << batch;
      if (got[r] > 0) last = r;
      offset += got[r];
    }
    for (size_t r = 0; r < last; ++r) EXPECT_EQ(got[r] % 4, 0) << "rank " << r << " at batch " << batch;
  }
  // 5 groups: 1.25, 2.5 and 1.25 of them by largest remainder are 1, 3, 1; the last group has 2 samples.
  EXPECT_EQ(scale_split_in_groups(split, 32, 18, 4), (std::vector<int64_t>{4, 0, 12, 2}));
}
