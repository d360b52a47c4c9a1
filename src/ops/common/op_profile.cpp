// ops/common/op_profile.cpp — the per-shape tally behind hetrain/op_profile.hpp.
#include "hetrain/op_profile.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace hetrain::ops {
namespace {
std::atomic<bool> g_on{false};
std::mutex g_mutex;
std::map<std::string, OpProfileRow>& rows() {
  static std::map<std::string, OpProfileRow> r;
  return r;
}
}  // namespace

void set_op_profiling(bool on) { g_on.store(on, std::memory_order_relaxed); }
bool op_profiling() { return g_on.load(std::memory_order_relaxed); }

void op_profile_add(const std::string& what, double seconds, double flops) {
  std::lock_guard<std::mutex> lock(g_mutex);
  OpProfileRow& r = rows()[what];
  r.what = what;
  r.calls += 1;
  r.seconds += seconds;
  r.flops += flops;
}

void op_profile_reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  rows().clear();
}

std::vector<OpProfileRow> op_profile() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<OpProfileRow> out;
  for (const auto& [key, row] : rows()) out.push_back(row);
  std::sort(out.begin(), out.end(), [](const OpProfileRow& a, const OpProfileRow& b) { return a.seconds > b.seconds; });
  return out;
}

}  // namespace hetrain::ops
