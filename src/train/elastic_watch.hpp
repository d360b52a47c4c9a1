// The asynchronous modes' watch for stalled ranks (docs/architecture.md, "Stalls and failures"): ranks
// never wait for each other there, so a stalled rank shows only as a row of the shared counter
// (dist::SampleCounter) whose local steps stop changing.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"

namespace hetrain::train {

// The wait beyond --stall-timeout before the watch names a rank: a group's arrival, which names exactly
// the member that is missing, speaks first (as dist::StepArrival's grace).
double heartbeat_grace(double timeout_s);

// Every rank watches every rank's local steps (a read every 0.25 s). A rank that has not finished and made
// no local step for --stall-timeout (and the grace) has stalled; inside a hybrid group the members that
// wait for it are one step ahead of it (steps are published before the group's reduction), so only the
// members furthest behind are named. The lowest rank that is not stalled itself speaks (a rank blocked
// behind a stalled one cannot) and ends the job.
class HeartbeatWatch {
 public:
  // `leaders`: every rank's group leader; `hosts`: every rank's host, for the message.
  HeartbeatWatch(double stall_timeout, int rank, std::vector<int> leaders, std::vector<std::string> hosts);
  // Every rank's quiet time starts now (after a pause in which nobody could step, as a validation).
  void restart();
  // Reads the rows when 0.25 s have passed since the last read; prints one line and calls MPI_Abort when
  // ranks stalled and this rank is the one to say so.
  void poll(dist::SampleCounter& counter);

 private:
  using Clock = std::chrono::steady_clock;
  double timeout_;
  int rank_;
  std::vector<int> leaders_;
  std::vector<std::string> hosts_;
  std::vector<int64_t> beats_;             // the local steps last seen of each rank
  std::vector<Clock::time_point> beat_times_;  // ... and when they last changed
  Clock::time_point last_read_{};
};

}  // namespace hetrain::train
