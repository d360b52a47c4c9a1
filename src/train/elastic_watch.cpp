#include "train/elastic_watch.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "hetrain/error.hpp"

namespace hetrain::train {

double heartbeat_grace(double timeout_s) { return std::max(5.0, 0.1 * timeout_s); }

HeartbeatWatch::HeartbeatWatch(double stall_timeout, int rank, std::vector<int> leaders, std::vector<std::string> hosts)
    : timeout_(stall_timeout),
      rank_(rank),
      leaders_(std::move(leaders)),
      hosts_(std::move(hosts)),
      beats_(leaders_.size(), -1),
      beat_times_(leaders_.size(), Clock::now()) {}

void HeartbeatWatch::restart() { beat_times_.assign(beat_times_.size(), Clock::now()); }

void HeartbeatWatch::poll(dist::SampleCounter& counter) {
  const int n = int(leaders_.size());
  if (timeout_ <= 0 || n < 2) return;
  const auto now = Clock::now();
  if (std::chrono::duration<double>(now - last_read_).count() < 0.25) return;
  last_read_ = now;
  const std::vector<dist::SampleCounter::RankStats> stats = counter.stats();
  const double limit = timeout_ + heartbeat_grace(timeout_);
  std::vector<bool> stale(size_t(n), false);
  double longest = 0;
  for (int r = 0; r < n; ++r) {
    if (r == rank_ || stats[size_t(r)].finished) continue;
    if (stats[size_t(r)].steps != beats_[size_t(r)]) {
      beats_[size_t(r)] = stats[size_t(r)].steps;
      beat_times_[size_t(r)] = now;
      continue;
    }
    const double quiet = std::chrono::duration<double>(now - beat_times_[size_t(r)]).count();
    stale[size_t(r)] = quiet > limit;
    if (stale[size_t(r)]) longest = std::max(longest, quiet);
  }
  for (int r = 0; r < rank_; ++r)
    if (!stale[size_t(r)] && !stats[size_t(r)].finished) return;  // a lower rank that runs speaks
  std::string stalled;
  for (int r = 0; r < n; ++r) {
    if (!stale[size_t(r)]) continue;
    bool behind = false;  // a stalled member of the same group further behind: r waits for it
    for (int q = 0; q < n; ++q)
      behind = behind || (stale[size_t(q)] && leaders_[size_t(q)] == leaders_[size_t(r)] &&
                          stats[size_t(q)].steps < stats[size_t(r)].steps);
    if (!behind)
      stalled += (stalled.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " on " + hosts_[size_t(r)];
  }
  if (stalled.empty()) return;
  std::fprintf(stderr,
               "hetrain: error: %s%s made no local step for %.0f s (--stall-timeout %g): stopped, hung or far "
               "slower than the others; ending the job\n",
               error_context_prefix().c_str(), stalled.c_str(), longest, timeout_);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace hetrain::train
