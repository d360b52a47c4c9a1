// EpochPlan: coverage under arbitrary per-step splits, determinism, epoch-to-epoch variation.
#include <gtest/gtest.h>

#include "data/rng.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::data;

namespace {
// A random split of b samples over `ranks` ranks (zeros allowed).
std::vector<int64_t> random_split(Rng& rng, int64_t b, int ranks) {
  std::vector<int64_t> cuts = {0, b};
  for (int r = 1; r < ranks; ++r) cuts.push_back(int64_t(rng.below(uint64_t(b) + 1)));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> out;
  for (int r = 0; r < ranks; ++r) out.push_back(cuts[r + 1] - cuts[r]);
  return out;
}
}  // namespace

TEST(EpochPlan, EverySampleOncePerEpochUnderRandomSplits) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed, 99);
    int64_t n = 1 + int64_t(rng.below(300)), batch = 1 + int64_t(rng.below(uint64_t(n) + 20));
    LastBatch last = rng.below(2) ? LastBatch::Drop : LastBatch::Partial;
    if (last == LastBatch::Drop && batch > n) batch = n;
    EpochPlan plan(seed, n, batch, last);
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      std::vector<int> hits(n, 0);
      int ranks = 1 + int(rng.below(6));
      for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) {
        auto split = random_split(rng, plan.batch_size(s), ranks);  // a new split every step
        int64_t off = 0;
        for (int64_t b : split) {
          for (int64_t i : plan.slice(epoch, s, off, b)) {
            ASSERT_GE(i, 0);
            ASSERT_LT(i, n);
            ++hits[i];
          }
          off += b;
        }
      }
      int64_t used = last == LastBatch::Drop ? (n / batch) * batch : n;
      int64_t once = 0;
      for (int h : hits) {
        ASSERT_LE(h, 1) << "seed " << seed;
        once += h;
      }
      ASSERT_EQ(once, used) << "seed " << seed << " n " << n << " batch " << batch;
    }
  }
}

TEST(EpochPlan, StepsAndBatchSizes) {
  EpochPlan drop(1, 10, 4, LastBatch::Drop), part(1, 10, 4, LastBatch::Partial);
  EXPECT_EQ(drop.steps_per_epoch(), 2);
  EXPECT_EQ(part.steps_per_epoch(), 3);
  EXPECT_EQ(part.batch_size(2), 2);
  EXPECT_EQ(drop.batch_size(1), 4);
  EXPECT_THROW(part.slice(0, 2, 1, 2), hetrain::Error);  // beyond the last batch
  EXPECT_THROW(part.batch_size(3), hetrain::Error);
  EXPECT_THROW(EpochPlan(1, 3, 4, LastBatch::Drop), hetrain::Error);
}

TEST(EpochPlan, IdenticalAcrossInstancesDifferentAcrossEpochsAndSeeds) {
  EpochPlan a(42, 1000, 32, LastBatch::Partial), b(42, 1000, 32, LastBatch::Partial), c(43, 1000, 32, LastBatch::Partial);
  EXPECT_EQ(a.permutation(3), b.permutation(3));
  EXPECT_EQ(a.slice(5, 7, 3, 10), b.slice(5, 7, 3, 10));
  EXPECT_NE(a.permutation(0), a.permutation(1));
  EXPECT_NE(a.permutation(0), c.permutation(0));
  auto p = a.permutation(0);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  // The slice is that window of the permutation.
  auto s = a.slice(0, 2, 5, 7);
  EXPECT_EQ(s, std::vector<int64_t>(p.begin() + 2 * 32 + 5, p.begin() + 2 * 32 + 12));
}

TEST(EpochPlan, NoShuffleIsSequential) {
  EpochPlan p(0, 10, 3, LastBatch::Partial, false);
  EXPECT_EQ(p.slice(4, 3, 0, 1), std::vector<int64_t>{9});
  EXPECT_EQ(p.slice(0, 1, 1, 2), (std::vector<int64_t>{4, 5}));
}
