#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "hetrain/resources.hpp"

namespace hetrain {
namespace {

// The metrics' host_mib must follow what the process really touches, and host_peak_mib must remember it.
TEST(ResidentMemory, FollowsTouchedPagesAndKeepsThePeak) {
  const ResidentMemory before = resident_memory();
  ASSERT_GT(before.now_bytes, 0u) << "VmRSS unreadable from /proc/self/status";
  ASSERT_GE(before.peak_bytes, before.now_bytes);
  constexpr size_t kBytes = size_t(96) << 20;
  ResidentMemory during;
  {
    std::unique_ptr<char[]> block(new char[kBytes]);
    std::memset(block.get(), 1, kBytes);  // touched pages are resident; untouched ones would not be
    during = resident_memory();
    EXPECT_GE(during.now_bytes, before.now_bytes + kBytes * 3 / 4)
        << "before " << before.now_bytes << ", while holding " << kBytes << " touched bytes " << during.now_bytes;
    EXPECT_NE(block[kBytes - 1], 0);  // keeps the writes
  }
  const ResidentMemory after = resident_memory();
  EXPECT_GE(after.peak_bytes, during.now_bytes);
}

}  // namespace
}  // namespace hetrain
