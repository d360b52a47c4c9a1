// dist/memory_caps.cpp — per-rank batch caps from free GPU memory (issue: memory caps feed the balancer).
#include <algorithm>
#include <cstdint>

#include "hetrain/dist/balance.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {

int64_t memory_batch_cap(int64_t free_bytes, int64_t reserve_bytes, int64_t bytes_per_sample) {
  HT_CHECK(bytes_per_sample > 0, "memory cap: bytes per sample must be positive, got ", bytes_per_sample);
  HT_CHECK(free_bytes >= 0 && reserve_bytes >= 0, "memory cap: negative memory (", free_bytes, " free, ",
           reserve_bytes, " reserved)");
  return std::max<int64_t>(0, free_bytes - reserve_bytes) / bytes_per_sample;
}

std::vector<int64_t> merge_caps(const std::vector<int64_t>& user_caps, const std::vector<int64_t>& memory_caps) {
  HT_CHECK(user_caps.size() == memory_caps.size(), "merge_caps: ", user_caps.size(), " user caps for ",
           memory_caps.size(), " ranks");
  std::vector<int64_t> out(user_caps);
  for (size_t r = 0; r < out.size(); ++r)
    if (memory_caps[r] >= 0) out[r] = std::min(out[r], memory_caps[r]);
  return out;
}

}  // namespace hetrain::dist
