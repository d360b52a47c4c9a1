// The per-step agreement with a stall watchdog (hetrain/dist/arrival.hpp).
//
// The sums travel in one MPI_Iallreduce, tested against the deadline. An Iallreduce that has not
// completed cannot say who is missing, so every rank also sends a one-int "arrived" message to rank 0
// (and rank 0 to rank 1) before joining it: at the deadline rank 0 knows exactly which ranks never came.
#include "hetrain/dist/arrival.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "hetrain/error.hpp"

namespace hetrain::dist {

namespace {
constexpr int kArrivalTag = 7301;
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double now_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }
// Rank 0 (or 1) names a missing rank at the timeout; the others wait this much longer before they end
// the job themselves, so the line that names the rank comes first.
double grace(double timeout_s) { return std::max(5.0, 0.1 * timeout_s); }
}  // namespace

StepArrival::StepArrival(MPI_Comm comm, std::vector<std::string> hosts, double timeout_s, std::vector<int> names)
    : comm_(comm), hosts_(std::move(hosts)), names_(std::move(names)), timeout_s_(timeout_s) {
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  HT_MPI_CHECK(MPI_Comm_size(comm, &size_));
  HT_CHECK(int(hosts_.size()) == size_, "StepArrival: ", hosts_.size(), " host names for ", size_, " ranks");
  if (names_.empty())
    for (int r = 0; r < size_; ++r) names_.push_back(r);
  HT_CHECK(int(names_.size()) == size_, "StepArrival: ", names_.size(), " rank names for ", size_, " ranks");
  if (timeout_s_ > 0 && size_ > 1) watchdog_ = std::thread([this] { watch(); });
}

StepArrival::~StepArrival() {
  if (!watchdog_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  watchdog_.join();
}

void StepArrival::step_done() { watched_step_.store(-1); }

void StepArrival::watch(int64_t step) {
  watched_since_.store(now_seconds());
  watched_step_.store(step);
}

void StepArrival::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; })) {
    const int64_t step = watched_step_.load();
    if (step < 0 || now_seconds() - watched_since_.load() <= 2 * timeout_s_ + grace(timeout_s_)) continue;
    char line[512];
    std::snprintf(line, sizeof line,
                  "hetrain: error: %sstep %lld: blocked in the step's collectives for more than %g s "
                  "(--stall-timeout): another rank stalled inside them; ending the job\n",
                  error_context_prefix().c_str(), (long long)step, 2 * timeout_s_);
    std::fputs(line, stderr);
    std::fflush(stderr);
    std::_Exit(1);  // MPI belongs to the main thread (MPI_THREAD_FUNNELED); the launcher ends the others
  }
}

double StepArrival::arrive(int64_t step, std::vector<double>& values) {
  const auto start = Clock::now();
  watch(step);
  // Who watches whom: rank 0 watches everyone, rank 1 watches rank 0.
  std::vector<MPI_Request> watch;
  std::vector<int> watched, got;
  int sent_step = int(step & 0x3fffffff), send_count = 0;
  MPI_Request sends[2];
  if (size_ > 1) {
    if (rank_ == 0) {
      for (int r = 1; r < size_; ++r) watched.push_back(r);
    } else if (rank_ == 1) {
      watched.push_back(0);
    }
    got.resize(watched.size());
    watch.resize(watched.size());
    for (size_t i = 0; i < watched.size(); ++i)
      HT_MPI_CHECK(MPI_Irecv(&got[i], 1, MPI_INT, watched[i], kArrivalTag, comm_, &watch[i]));
    if (rank_ != 0) HT_MPI_CHECK(MPI_Isend(&sent_step, 1, MPI_INT, 0, kArrivalTag, comm_, &sends[send_count++]));
    if (rank_ == 0) HT_MPI_CHECK(MPI_Isend(&sent_step, 1, MPI_INT, 1, kArrivalTag, comm_, &sends[send_count++]));
  }
  MPI_Request sum;
  HT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_SUM, comm_, &sum));
  int done = 0;
  int spins = 0;
  // Rank 0 and rank 1 speak at the deadline; the others give them time to, then end the job themselves.
  const bool speaker = rank_ <= 1;
  while (true) {
    HT_MPI_CHECK(MPI_Test(&sum, &done, MPI_STATUS_IGNORE));
    if (done) break;
    // Spin briefly (most steps arrive together), then sleep so a slower rank on the same core can run.
    if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(100));
    const double waited = timeout_s_ > 0 && spins % 64 == 0 ? seconds_since(start) : 0.0;
    if (waited > timeout_s_) {
      std::vector<int> missing;
      for (size_t i = 0; i < watch.size(); ++i) {
        int arrived = 0;
        HT_MPI_CHECK(MPI_Test(&watch[i], &arrived, MPI_STATUS_IGNORE));
        if (!arrived) missing.push_back(watched[i]);
      }
      // Only a speaker can name the missing rank; when everyone it watches is here, someone else is
      // missing (or a rank stalled inside the reduction): after the grace period any rank ends the job.
      if ((speaker && !missing.empty()) || waited > timeout_s_ + grace(timeout_s_)) report_stall(step, missing);
    }
  }
  // Everyone entered the reduction, so every arrival message was sent: these complete at once.
  if (!watch.empty()) HT_MPI_CHECK(MPI_Waitall(int(watch.size()), watch.data(), MPI_STATUSES_IGNORE));
  if (send_count) HT_MPI_CHECK(MPI_Waitall(send_count, sends, MPI_STATUSES_IGNORE));
  return seconds_since(start);
}

void StepArrival::report_stall(int64_t step, const std::vector<int>& missing) const {
  std::string who;
  for (size_t i = 0; i < missing.size() && i < 8; ++i)
    who += (i ? ", " : "") + std::string("rank ") + std::to_string(names_[size_t(missing[i])]) + " on " +
           hosts_[size_t(missing[i])];
  if (missing.size() > 8) who += " and " + std::to_string(missing.size() - 8) + " more";
  char timeout[32];
  std::snprintf(timeout, sizeof timeout, "%g", timeout_s_);
  std::string line = "hetrain: error: " + error_context_prefix() + "step " + std::to_string(step) + ": ";
  if (missing.empty())
    line += "not every rank arrived within " + std::string(timeout) + " s (--stall-timeout); ending the job";
  else
    line += who + " did not arrive within " + timeout +
            " s (--stall-timeout): stopped, hung or far slower than the others; ending the job";
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);  // the whole job, also when comm_ is a sub-communicator
  std::_Exit(1);
}

}  // namespace hetrain::dist
