#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "hetrain/dist/balance.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::dist;

TEST(MemoryCaps, FreeMinusReserveOverBytesPerSample) {
  const int64_t GiB = int64_t(1) << 30;
  // 80 GiB free, 8 GiB reserved, 100 MiB per sample (resnet50-sized at 224×224): 737 samples.
  EXPECT_EQ(memory_batch_cap(80 * GiB, 8 * GiB, 100 << 20), (72 * GiB) / (100 << 20));
  EXPECT_EQ(memory_batch_cap(1000, 0, 10), 100);
  EXPECT_EQ(memory_batch_cap(1009, 0, 10), 100);  // rounds down: a partial sample does not fit
  EXPECT_EQ(memory_batch_cap(100, 200, 10), 0);   // less free than the reserve: nothing fits
  EXPECT_THROW(memory_batch_cap(100, 0, 0), Error);
  EXPECT_THROW(memory_batch_cap(-1, 0, 10), Error);
}

TEST(MemoryCaps, MergeTakesTheSmallerCapAndNegativeMeansNone) {
  const int64_t none = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(merge_caps({none, 50, none, 8}, {-1, 80, 30, 0}), (std::vector<int64_t>{none, 50, 30, 0}));
  EXPECT_THROW(merge_caps({none}, {1, 2}), Error);
}
