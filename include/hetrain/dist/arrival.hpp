// hetrain/dist/arrival.hpp — the per-step agreement every rank passes through, with a stall watchdog.
//
// Once per step, before the gradients are reduced, every rank arrives with a few numbers (stop requests
// from signals, a due checkpoint, a failed output) and gets their sums back: every rank then takes the
// same decision at the same step boundary. The wait is bounded: a rank that does not arrive within the
// timeout (stopped with SIGSTOP, hung in I/O, swapped out) is named in one line and the job ends with
// MPI_Abort, instead of the others waiting forever (docs/architecture.md, "Failures").
//
// A rank can also stall after it arrived, inside the step's later collectives (the gradient reduction,
// the totals, a checkpoint). Those waits cannot name the missing rank, but they are bounded too: from
// arrive() (or watch()) until step_done() a watchdog thread (which makes no MPI calls) ends this process
// with one line once twice the timeout and a grace period have passed; the launcher then ends the job.
#pragma once

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
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
  // Collective. Sums `values` (the same count on every rank) over the ranks, in place. Returns the
  // seconds this rank waited for the others. When some rank has not arrived after the timeout, rank 0
  // names it (rank 1 names rank 0 when rank 0 is the missing one) and the job ends with MPI_Abort; the
  // other ranks end it a little later, should those two be gone too.
  double arrive(int64_t step, std::vector<double>& values);
  // The step's collectives are over (the watchdog stops watching until the next arrive() or watch()).
  void step_done();
  // Bounds other collective work of a step the same way until step_done() (a checkpoint: every rank
  // waits while rank 0 writes).
  void watch(int64_t step);
  double timeout() const { return timeout_s_; }

 private:
  [[noreturn]] void report_stall(int64_t step, const std::vector<int>& missing) const;
  void watch();  // the watchdog thread
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
  std::vector<int> names_;
  double timeout_s_;
  // watchdog: the step being watched (-1: none) and since when (steady clock, seconds)
  std::atomic<int64_t> watched_step_{-1};
  std::atomic<double> watched_since_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace hetrain::dist
