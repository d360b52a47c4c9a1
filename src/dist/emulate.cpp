// Emulated heterogeneity: a rank of speed s sleeps (1/s − 1)× its compute time after every step.
#include "hetrain/dist/emulate.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include <time.h>

#include "dist/agreed.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {
namespace {
std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : text) {
    if (c == sep) parts.push_back(cur), cur.clear();
    else if (c != ' ') cur += c;
  }
  parts.push_back(cur);
  return parts;
}

double parse_speed(const std::string& s, const char* option) {
  char* end = nullptr;
  double v = s.empty() ? NAN : std::strtod(s.c_str(), &end);
  HT_AGREED_CHECK(!s.empty() && end && *end == '\0' && std::isfinite(v), option, ": ", quoted(s), " is not a number");
  HT_AGREED_CHECK(v > 0, option, ": speed must be > 0, got ", s);
  HT_AGREED_CHECK(v <= 1, option, ": speed ", s, " > 1 cannot be emulated by sleeping; give speeds relative to the fastest rank");
  return v;
}

int64_t parse_int(const std::string& s, const char* option, const char* what) {
  char* end = nullptr;
  long long v = s.empty() ? -1 : std::strtoll(s.c_str(), &end, 10);
  HT_AGREED_CHECK(!s.empty() && end && *end == '\0' && v >= 0, option, ": ", what, " ", quoted(s), " is not an integer >= 0");
  return v;
}
}  // namespace

SpeedEmulator::SpeedEmulator(const std::string& speeds, const std::string& schedule, int n)
    : n_(n), speeds_(size_t(std::max(n, 0)), 1.0) {
  HT_AGREED_CHECK(n >= 1, "--emulate-speed: world size must be >= 1, got ", n);
  if (!speeds.empty()) {
    std::vector<std::string> parts = split_on(speeds, ',');
    HT_AGREED_CHECK(parts.size() == size_t(n), "--emulate-speed: expected ", n, " speeds (one per rank), got ",
             parts.size(), " in ", quoted(speeds));
    for (int r = 0; r < n; ++r) speeds_[r] = parse_speed(parts[r], "--emulate-speed");
    active_ = true;
  }
  if (!schedule.empty()) {
    for (const std::string& item : split_on(schedule, ',')) {
      std::vector<std::string> f = split_on(item, ':');
      HT_AGREED_CHECK(f.size() == 3, "--emulate-schedule: expected STEP:RANK:SPEED, got ", quoted(item));
      Change c{parse_int(f[0], "--emulate-schedule", "step"), int(parse_int(f[1], "--emulate-schedule", "rank")),
               parse_speed(f[2], "--emulate-schedule")};
      HT_AGREED_CHECK(c.rank < n, "--emulate-schedule: rank ", c.rank, " in ", quoted(item), " but the world has ", n, " ranks");
      changes_.push_back(c);
    }
    std::stable_sort(changes_.begin(), changes_.end(), [](const Change& a, const Change& b) { return a.step < b.step; });
    active_ = true;
  }
}

double SpeedEmulator::speed(int rank, int64_t step) const {
  if (!active_) return 1.0;
  HT_CHECK(rank >= 0 && rank < n_, "emulator: rank ", rank, " outside [0, ", n_, ")");
  double s = speeds_[rank];
  for (const Change& c : changes_)
    if (c.rank == rank && c.step <= step) s = c.speed;  // sorted by step: the latest change wins
  return s;
}

double SpeedEmulator::sleep_seconds(int rank, int64_t step, double compute_seconds) const {
  if (!active_ || !(compute_seconds > 0)) return 0.0;
  return (1.0 / speed(rank, step) - 1.0) * compute_seconds;
}

double SpeedEmulator::apply(int rank, int64_t step, double compute_seconds, bool setup_step) const {
  if (setup_step) return 0.0;
  double s = sleep_seconds(rank, step, compute_seconds);
  if (s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(s));
  return s;
}

double SpeedEmulator::thread_cpu_seconds() {
  timespec ts{};
  HT_CHECK(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0, "emulator: cannot read the thread's CPU clock");
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::string SpeedEmulator::describe() const {
  if (!active_) return "no emulated heterogeneity (real speeds)";
  std::ostringstream os;
  os << "EMULATED heterogeneity (ranks sleep (1/s-1) x their compute time; not real hardware): speeds [";
  for (int r = 0; r < n_; ++r) os << (r ? ", " : "") << speeds_[r];
  os << "]";
  for (const Change& c : changes_) os << "; from step " << c.step << " rank " << c.rank << " speed " << c.speed;
  return os.str();
}

}  // namespace hetrain::dist
