// The per-step agreement with a stall watchdog (hetrain/dist/arrival.hpp).
//
// The sums travel in one MPI_Iallreduce, tested against the deadline. An Iallreduce that has not
// completed cannot say who is missing, so every rank also sends a one-int "arrived" message to rank 0
// (and rank 0 to rank 1) before joining it: at the deadline rank 0 knows exactly which ranks never came.
// A rank that arrived and then stopped (SIGSTOP while it waited for the others, which is where a fast rank
// spends its idle time) is told apart by its silence: the waiting ranks send a one-int sign of life to
// the same watcher every quarter of the timeout.
#include "hetrain/dist/arrival.hpp"
#include "hetrain/dist/elastic.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "hetrain/error.hpp"

namespace hetrain::dist {

namespace {
constexpr int kArrivalTag = 7301;
constexpr int kAliveTag = 7302;
constexpr int kDoneTag = 7303;  // "I finished this step's collectives": a rank gone on is no suspect
constexpr int kCloseTag = 7304;  // "I send nothing more" (close())
constexpr int kStepMask = 0x3fffffff;
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double now_seconds() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }
// Rank 0 (or 1) names a missing rank at the timeout; the others wait this much longer before they end
// the job themselves, so the line that names the rank comes first.
double grace(double timeout_s) { return std::max(5.0, 0.1 * timeout_s); }
// Whether a sign of life sent in (masked) step `seen` is from this step or a later one: a rank that has
// gone on to the next step is alive too. Older ones are left over from steps that ended.
bool this_step_or_later(int seen, int now) { return ((seen - now) & kStepMask) < kStepMask / 2; }
std::string seconds_text(double s) {
  char t[32];
  std::snprintf(t, sizeof t, "%g", s);
  return t;
}
}  // namespace

StepArrival::StepArrival(MPI_Comm comm, std::vector<std::string> hosts, double timeout_s, std::vector<int> names)
    : comm_(comm), hosts_(std::move(hosts)), names_(std::move(names)), timeout_s_(timeout_s) {
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  HT_MPI_CHECK(MPI_Comm_size(comm, &size_));
  HT_CHECK(int(hosts_.size()) == size_, "StepArrival: ", hosts_.size(), " host names for ", size_, " ranks");
  if (names_.empty())
    for (int r = 0; r < size_; ++r) names_.push_back(r);
  HT_CHECK(int(names_.size()) == size_, "StepArrival: ", names_.size(), " rank names for ", size_, " ranks");
  // Who watches whom: rank 0 watches everyone, rank 1 watches rank 0.
  if (size_ > 1) {
    if (rank_ == 0)
      for (int r = 1; r < size_; ++r) watched_.push_back(r);
    else if (rank_ == 1)
      watched_.push_back(0);
  }
  last_heard_.assign(watched_.size(), 0.0);
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

void StepArrival::step_done() {
  watched_step_.store(-1);
  if (all_arrived_ && timeout_s_ > 0 && size_ > 1) {
    // Past this step, this rank may wait where it sends no sign of life (a checkpoint's broadcast): the
    // watcher, should it still be inside the step, then knows that this rank is not the one that stalled.
    Beat& done = beats_.emplace_back(Beat{step_tag_, MPI_REQUEST_NULL});
    HT_MPI_CHECK(MPI_Isend(&done.step_tag, 1, MPI_INT, rank_ == 0 ? 1 : 0, kDoneTag, comm_, &done.request));
  }
  all_arrived_ = false;
}

void StepArrival::watch(int64_t step) {
  // The first step watched is this process's first; any other step ends the set-up leniency.
  if (first_step_number_ < 0)
    first_step_number_ = step;
  else if (step != first_step_number_)
    first_step_ = false;
  watched_since_.store(now_seconds());
  watched_blocked_.store(2 * timeout_now());
  watched_limit_.store(2 * timeout_now() + grace(timeout_now()));
  watched_step_.store(step);
}

void StepArrival::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  double last_woken = now_seconds();
  while (!wake_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; })) {
    const double woken = now_seconds();
    // A process that was stopped and continued: the time it was away is nobody's stall.
    if (woken - last_woken > std::max(1.0, timeout_s_ / 2)) watched_since_.store(watched_since_.load() + woken - last_woken);
    last_woken = woken;
    const int64_t step = watched_step_.load();
    if (step < 0 || now_seconds() - watched_since_.load() <= watched_limit_.load()) continue;
    char line[512];
    std::snprintf(line, sizeof line,
                  "hetrain: error: %sstep %lld: blocked in the step's collectives for more than %g s "
                  "(--stall-timeout): another rank stalled inside them; ending the job\n",
                  error_context_prefix().c_str(), (long long)step, watched_blocked_.load());
    std::fputs(line, stderr);
    std::fflush(stderr);
    std::_Exit(1);  // MPI belongs to the main thread (MPI_THREAD_FUNNELED); the launcher ends the others
  }
}

double StepArrival::own_absence(double now) {
  const double gap = last_looked_ > 0 ? now - last_looked_ : 0;
  last_looked_ = now;
  // This process did not run for a while (SIGSTOP and SIGCONT, swapped out): the others were not silent to
  // it, it was away, so that time counts against nobody (a stopped rank, once continued, accuses no one).
  if (gap <= timeout_now() / 2) return 0;
  for (double& heard : last_heard_) heard += gap;
  return gap;
}

void StepArrival::heartbeat(double now) {
  // Sends that completed are done with their buffers.
  for (auto it = beats_.begin(); it != beats_.end();) {
    int done = 0;
    HT_MPI_CHECK(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE));
    it = done ? beats_.erase(it) : std::next(it);
  }
  if (now - last_sent_ < timeout_now() / 4) return;
  last_sent_ = now;
  Beat& beat = beats_.emplace_back(Beat{step_tag_, MPI_REQUEST_NULL});
  HT_MPI_CHECK(MPI_Isend(&beat.step_tag, 1, MPI_INT, rank_ == 0 ? 1 : 0, kAliveTag, comm_, &beat.request));
}

void StepArrival::listen(double now) {
  if (watched_.empty()) return;
  for (size_t i = 0; i < arrivals_.size(); ++i) {
    if (arrivals_[i] == MPI_REQUEST_NULL) continue;  // arrived (MPI_Test sets completed requests to null)
    int arrived = 0;
    HT_MPI_CHECK(MPI_Test(&arrivals_[i], &arrived, MPI_STATUS_IGNORE));
    if (arrived) last_heard_[i] = now;
  }
  drain(now);
  if (!all_arrived_ && std::any_of(arrivals_.begin(), arrivals_.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; }))
    return;  // someone has not arrived yet: arrive() names it at the deadline
  std::vector<int> silent;
  double longest = 0;
  for (size_t i = 0; i < watched_.size(); ++i)
    if (!done_[i] && now - last_heard_[i] > timeout_now()) {
      silent.push_back(watched_[i]);
      longest = std::max(longest, now - last_heard_[i]);
    }
  if (!silent.empty()) report_silent(watched_step_.load(), silent, longest);
}

void StepArrival::drain(double now) {
  for (const int tag : {kAliveTag, kDoneTag, kCloseTag}) {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      HT_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, &status));
      if (!flag) break;
      int seen = 0;
      HT_MPI_CHECK(MPI_Recv(&seen, 1, MPI_INT, status.MPI_SOURCE, tag, comm_, MPI_STATUS_IGNORE));
      const size_t i = rank_ == 0 ? size_t(status.MPI_SOURCE - 1) : 0;
      if (i >= last_heard_.size()) continue;
      if (tag == kCloseTag) {
        if (i < closed_.size()) closed_[i] = 1;
        continue;
      }
      if (!this_step_or_later(seen, step_tag_)) continue;  // from a step that ended
      last_heard_[i] = now;
      if (tag == kDoneTag && i < done_.size()) done_[i] = 1;
    }
  }
}

double StepArrival::arrive(int64_t step, std::vector<double>& values, const char* at, double patience) {
  const auto start = Clock::now();
  double entered = now_seconds();
  last_looked_ = entered;
  // Not everyone is here yet (a step may hold several meetings: --bn sync's sums come before its own):
  // until the sum completes, a silent rank is one that did not arrive, not one that fell silent.
  all_arrived_ = false;
  watch(step);
  const double limit = patience * timeout_now();
  watched_blocked_.store(2 * limit);
  watched_limit_.store(2 * limit + grace(limit));
  // A meeting inside a step's end (the checkpoint) has a tag of its own between that step's and the next
  // one's, so neither takes the other's leftover messages for its own.
  step_tag_ = int((2 * step + (at ? 1 : 0)) & kStepMask);
  last_sent_ = entered;  // the arrival message is this step's first sign of life
  int sent_step = step_tag_, send_count = 0;
  MPI_Request sends[2];
  if (size_ > 1) {
    arrival_got_.assign(watched_.size(), 0);
    arrivals_.assign(watched_.size(), MPI_REQUEST_NULL);
    std::fill(last_heard_.begin(), last_heard_.end(), entered);
    done_.assign(watched_.size(), 0);
    if (timeout_s_ > 0) drain(entered);  // the last step's leftovers (every rank's "done" comes each step)
    for (size_t i = 0; i < watched_.size(); ++i)
      HT_MPI_CHECK(MPI_Irecv(&arrival_got_[i], 1, MPI_INT, watched_[i], kArrivalTag, comm_, &arrivals_[i]));
    HT_MPI_CHECK(MPI_Isend(&sent_step, 1, MPI_INT, rank_ == 0 ? 1 : 0, kArrivalTag, comm_, &sends[send_count++]));
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
    RmaProgress::poll();  // the asynchronous modes: a rank waiting here still serves its shard of the center
    // Spin briefly (most steps arrive together), then sleep so a slower rank on the same core can run.
    if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (timeout_s_ <= 0 || size_ < 2 || spins % 64 != 0) continue;
    const double now = now_seconds();
    entered += own_absence(now);
    heartbeat(now);
    listen(now);  // names a rank that arrived and fell silent
    const double waited = now - entered;
    if (waited > limit) {
      std::vector<int> missing;
      for (size_t i = 0; i < arrivals_.size(); ++i)
        if (arrivals_[i] != MPI_REQUEST_NULL) missing.push_back(watched_[i]);
      // Only a speaker can name the missing rank; when everyone it watches is here, someone else is
      // missing (or a rank stalled inside the reduction): after the grace period any rank ends the job.
      if ((speaker && !missing.empty()) || waited > limit + grace(limit)) report_stall(step, missing, at, limit);
    }
  }
  // Everyone entered the reduction, so every arrival message was sent: these complete at once.
  if (!arrivals_.empty()) HT_MPI_CHECK(MPI_Waitall(int(arrivals_.size()), arrivals_.data(), MPI_STATUSES_IGNORE));
  if (send_count) HT_MPI_CHECK(MPI_Waitall(send_count, sends, MPI_STATUSES_IGNORE));
  all_arrived_ = true;
  return seconds_since(start);
}

double StepArrival::meet(int64_t step, std::vector<double>& values, const char* at) {
  // Twice the timeout: a rank that left the step's reduction early meets here while the step's watcher
  // names a rank stopped inside that reduction (after one timeout), and must not speak first.
  const double waited = arrive(step, values, at, 2);
  all_arrived_ = false;
  return waited;
}

void StepArrival::close() {
  watched_step_.store(-1);
  all_arrived_ = false;
  if (timeout_s_ <= 0 || size_ < 2) return;  // no sign of life was ever sent
  Beat& bye = beats_.emplace_back(Beat{0, MPI_REQUEST_NULL});
  HT_MPI_CHECK(MPI_Isend(&bye.step_tag, 1, MPI_INT, rank_ == 0 ? 1 : 0, kCloseTag, comm_, &bye.request));
  // Each rank's messages to its watcher are received in the order they were sent: once the watcher has
  // the last one, it has read every earlier one. Bounded: a rank that never comes here has already failed
  // some collective of the run, which ends the job anyway.
  const double deadline = now_seconds() + timeout_s_;
  closed_.assign(watched_.size(), 0);
  while (std::find(closed_.begin(), closed_.end(), 0) != closed_.end() && now_seconds() < deadline) {
    drain(now_seconds());
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (;;) {
    int sent = 0;
    for (Beat& beat : beats_) {
      int done = 0;
      HT_MPI_CHECK(MPI_Test(&beat.request, &done, MPI_STATUS_IGNORE));
      sent += done;
    }
    if (sent == int(beats_.size())) break;
    if (now_seconds() > deadline) {  // kept for good, so MPI may still read them at MPI_Finalize
      static auto* in_flight = new std::list<Beat>;
      in_flight->splice(in_flight->end(), beats_);
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  beats_.clear();
}

void StepArrival::keep_alive() {
  if (!all_arrived_ || timeout_s_ <= 0 || size_ < 2) return;
  const double now = now_seconds();
  // Throttled: the communicator calls this between tests of its requests.
  if (now - last_listened_ < 0.01) return;
  last_listened_ = now;
  own_absence(now);
  heartbeat(now);
  listen(now);
}

void StepArrival::wait(MPI_Request* requests, int n) {
  int done = 0, spins = 0;
  for (;;) {
    HT_MPI_CHECK(MPI_Testall(n, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    RmaProgress::poll();
    if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(100));
    keep_alive();
  }
}

std::string StepArrival::who(const std::vector<int>& ranks) const {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i)
    out += (i ? ", " : "") + std::string("rank ") + std::to_string(names_[size_t(ranks[i])]) + " on " +
           hosts_[size_t(ranks[i])];
  if (ranks.size() > 8) out += " and " + std::to_string(ranks.size() - 8) + " more";
  return out;
}

void StepArrival::report_stall(int64_t step, const std::vector<int>& missing, const char* at, double limit) const {
  std::string line = "hetrain: error: " + error_context_prefix() + "step " + std::to_string(step) + ": ";
  const std::string where = at ? std::string(" at ") + at : std::string();
  if (missing.empty())
    line += "not every rank arrived" + where + " within " + seconds_text(limit) + " s (--stall-timeout); ending the job";
  else
    line += who(missing) + " did not arrive" + where + " within " + seconds_text(limit) +
            " s (--stall-timeout): stopped, hung or far slower than the others; ending the job";
  end_job(line);
}

void StepArrival::report_silent(int64_t step, const std::vector<int>& silent, double silent_for) const {
  end_job("hetrain: error: " + error_context_prefix() + "step " + std::to_string(step) + ": " + who(silent) +
          " arrived, then fell silent inside the step's collectives for " + seconds_text(std::round(silent_for)) +
          " s (--stall-timeout " + seconds_text(timeout_now()) + "): stopped or hung; ending the job");
}

void StepArrival::end_job(const std::string& line) const {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);  // the whole job, also when comm_ is a sub-communicator
  std::_Exit(1);
}

}  // namespace hetrain::dist
