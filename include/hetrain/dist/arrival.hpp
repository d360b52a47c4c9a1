// hetrain/dist/arrival.hpp — the per-step agreement every rank passes through, with a stall watchdog.
//
// Once per step, before the gradients are reduced, every rank arrives with a few numbers (stop requests
// from signals, a due checkpoint, a failed output) and gets their sums back: every rank then takes the
// same decision at the same step boundary. The wait is bounded: a rank that does not arrive within the
// timeout (stopped with SIGSTOP, hung in I/O, swapped out) is named in one line and the job ends with
// MPI_Abort, instead of the others waiting forever (docs/architecture.md, "Failures").
//
// A rank can also stall after it arrived: inside the agreement's reduction, or in the step's later
// collectives (the gradient reduction, the totals). A rank that arrived cannot be named by its absence,
// so every rank waiting in a watched wait (arrive(), wait(), keep_alive()) sends a sign of life to the
// watcher (rank 0; rank 0 sends to rank 1) every quarter of the timeout, and a "done" message when it
// leaves the step (step_done()); the watcher names an arrived rank that is not done and that it has not
// heard from for a whole timeout. Waits that are not watched (a checkpoint) are bounded
// too: from arrive() (or watch()) until step_done() a watchdog thread (which makes no MPI calls) ends this
// process with one line once twice the timeout and a grace period have passed; the launcher then ends
// the job.
//
// The first step of a process includes one-off set-up (kernel compilation, autotuning, first-touch page
// faults), which is no stall: the first step watched (arrive() or watch()) is judged against
// kFirstStepFactor times the timeout.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace hetrain::dist {

class StepArrival {
 public:
  // hosts[r]: rank r's host, for the message. timeout_s <= 0: wait without limit. names[r]: how the
  // message calls rank r of `comm` (its world rank, for a sub-communicator such as a hybrid group);
  // empty: its rank in `comm`. A stall ends the whole job (MPI_Abort on MPI_COMM_WORLD).
  StepArrival(MPI_Comm comm, std::vector<std::string> hosts, double timeout_s, std::vector<int> names = {});
  ~StepArrival();
  StepArrival(const StepArrival&) = delete;
  StepArrival& operator=(const StepArrival&) = delete;
  static constexpr double kFirstStepFactor = 10;
  // Collective. Sums `values` (the same count on every rank) over the ranks, in place. Returns the
  // seconds this rank waited for the others. When some rank has not arrived after the timeout, rank 0
  // names it (rank 1 names rank 0 when rank 0 is the missing one) and the job ends with MPI_Abort; the
  // other ranks end it a little later, should those two be gone too. A rank that arrived and then fell
  // silent is named the same way.
  // `at` names the meeting in that line when it is not the step's own (e.g. "the checkpoint");
  // `patience` multiplies the timeout for a meeting that includes slow work on some rank (a file write).
  double arrive(int64_t step, std::vector<double>& values, const char* at = nullptr, double patience = 1);
  // A meeting inside the step, before its own arrive() (--bn sync's sums in the forward and backward pass):
  // sums and bounds like arrive() with twice the timeout, naming a rank that does not come "at" it, but
  // leaves the step's later collectives unstarted, so keep_alive() judges no silence until arrive() (a
  // slower rank may still be computing towards the next meeting).
  double meet(int64_t step, std::vector<double>& values, const char* at);
  // Waits for `n` requests of the step's later collectives (after arrive(), before step_done()) by
  // testing them, sending signs of life and naming a rank that fell silent.
  void wait(MPI_Request* requests, int n);
  // One round of what wait() does besides testing: for waits that poll elsewhere (the gradient
  // communicator's). Cheap when called often.
  void keep_alive();
  // The step's collectives are over (the watchdog stops watching until the next arrive() or watch()).
  void step_done();
  // Bounds other collective work of a step the same way until step_done() (a checkpoint: every rank
  // waits while rank 0 writes).
  void watch(int64_t step);
  // Collective, once at the end of a run, before MPI ends: every rank tells its watcher it sends nothing
  // more and waits until the signs of life it sent were received, so none is still in flight (its buffer
  // freed with this object) when MPI_Finalize runs.
  void close();
  double timeout() const { return timeout_s_; }

 private:
  [[noreturn]] void report_stall(int64_t step, const std::vector<int>& missing, const char* at, double limit) const;
  [[noreturn]] void report_silent(int64_t step, const std::vector<int>& silent, double silent_for) const;
  [[noreturn]] void end_job(const std::string& line) const;
  std::string who(const std::vector<int>& ranks) const;  // e.g. rank 2 on node7, rank 5 on node9
  void watch();  // the watchdog thread
  // Signs of life: send one when due; the watcher also reads the ones that came and names a rank silent
  // for longer than the timeout (once every rank of the step has arrived).
  void heartbeat(double now);
  void listen(double now);
  void drain(double now);  // the watcher: reads the signs of life and "done" messages that came
  // How long this process was away (not running) since it last looked, when that is longer than half the
  // timeout (else 0); the ranks it watches are credited with that time.
  double own_absence(double now);
  double timeout_now() const { return first_step_ ? kFirstStepFactor * timeout_s_ : timeout_s_; }
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
  std::vector<int> names_;
  double timeout_s_;
  bool first_step_ = true;         // until a second step is watched
  int64_t first_step_number_ = -1;
  // signs of life (steady clock seconds): this step's masked number, when this rank last sent one, the
  // sends in flight; the watcher's: when it last heard from each rank it watches, and whether it arrived
  int step_tag_ = 0;
  double last_sent_ = 0, last_listened_ = 0, last_looked_ = 0;
  struct Beat {
    int step_tag;  // the send's buffer: it lives until the send completes
    MPI_Request request;
  };
  std::list<Beat> beats_;
  std::vector<int> watched_;
  std::vector<MPI_Request> arrivals_;  // the watcher's receives of this step's arrival messages
  std::vector<int> arrival_got_;
  std::vector<double> last_heard_;
  std::vector<char> done_;  // the watcher: ranks that finished this step's collectives
  std::vector<char> closed_;  // the watcher, in close(): ranks that said they send nothing more
  std::vector<char> arrived_;
  bool all_arrived_ = false;
  // watchdog: the step being watched (-1: none) and since when (steady clock, seconds)
  std::atomic<int64_t> watched_step_{-1};
  std::atomic<double> watched_since_{0};
  std::atomic<double> watched_limit_{0};    // the watchdog ends the process past this many seconds
  std::atomic<double> watched_blocked_{0};  // what its line says the wait's bound was
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace hetrain::dist
