#include "hetrain/resources.hpp"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "hetrain/error.hpp"

namespace hetrain {
namespace {
constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

// The value in kB of the line "<key>: <n> kB" of a /proc file, in bytes; kUnknown when absent.
uint64_t proc_kb(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, key.size() + 1, key + ":") == 0) return std::stoull(line.substr(key.size() + 1)) * 1024;
  return kUnknown;
}
}  // namespace

uint64_t available_memory_bytes() {
  uint64_t avail = kUnknown;
  try {
    avail = proc_kb("/proc/meminfo", "MemAvailable");
    struct rlimit lim;
    if (::getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
      const uint64_t used = proc_kb("/proc/self/status", "VmSize");
      const uint64_t left = used == kUnknown ? uint64_t(lim.rlim_cur) : used >= lim.rlim_cur ? 0 : lim.rlim_cur - used;
      avail = std::min(avail, left);
    }
  } catch (const std::exception&) {  // an unreadable number in /proc: no estimate rather than a wrong one
  }
  return avail;
}

ResidentMemory resident_memory() {
  ResidentMemory r;
  std::ifstream in("/proc/self/status");  // one read for both lines
  for (std::string line; std::getline(in, line);) {
    uint64_t* field = line.compare(0, 6, "VmRSS:") == 0   ? &r.now_bytes
                      : line.compare(0, 6, "VmHWM:") == 0 ? &r.peak_bytes
                                                          : nullptr;
    if (!field) continue;
    try {
      *field = std::stoull(line.substr(6)) * 1024;
    } catch (const std::exception&) {  // unreadable: 0, as documented
    }
  }
  // The kernel updates its high-water mark lazily (per-thread counters), so it can trail a VmRSS read
  // earlier: the peak is also at least every VmRSS this process has read, which keeps it from going down.
  static std::atomic<uint64_t> highest_read{0};
  uint64_t seen = highest_read.load();
  while (r.now_bytes > seen && !highest_read.compare_exchange_weak(seen, r.now_bytes)) {
  }
  r.peak_bytes = std::max({r.peak_bytes, r.now_bytes, seen});
  return r;
}

uint64_t free_disk_bytes(const std::string& folder) {
  struct statvfs st;
  if (::statvfs(folder.c_str(), &st) != 0) return kUnknown;
  return uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
}

std::string bytes_text(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  else std::snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  return buf;
}

void check_memory_for(double bytes, const std::string& what) {
  const uint64_t avail = available_memory_bytes();
  if (avail == kUnknown || bytes <= double(avail)) return;
  HT_THROW(what, " needs about ", bytes_text(bytes), " of memory, but only ", bytes_text(double(avail)),
           " is available");
}

void check_disk_for(double bytes, const std::string& path, const std::string& what) {
  const size_t slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const uint64_t free = free_disk_bytes(folder);
  if (free == kUnknown || bytes <= double(free)) return;
  HT_THROW(what, " needs about ", bytes_text(bytes), " of disk space, but ", folder, " has only ",
           bytes_text(double(free)), " free");
}

}  // namespace hetrain
