#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "data/pack.hpp"

namespace hetrain::data {
namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Progress::Progress(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled && total > 0), tty_(isatty(2)), start_(now_s()) {}

void Progress::add(int64_t n) {
  if (!enabled_) return;
  done_ += n;
  double frac = double(done_) / total_;
  if (tty_) {
    int filled = int(frac * 30);
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %lld/%lld %.1fs", label_.c_str(), filled,
                 "##############################", 30 - filled, "", int(frac * 100), (long long)done_,
                 (long long)total_, now_s() - start_);
    std::fflush(stderr);
  } else if (int(frac * 10) > last_decile_) {
    last_decile_ = int(frac * 10);
    std::fprintf(stderr, "%s: %d%% (%lld/%lld samples, %.1fs)\n", label_.c_str(), last_decile_ * 10,
                 (long long)done_, (long long)total_, now_s() - start_);
  }
}

void Progress::finish() {
  if (enabled_ && tty_) std::fprintf(stderr, "\n");
  enabled_ = false;
}

}  // namespace hetrain::data
