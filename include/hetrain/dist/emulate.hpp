// hetrain/dist/emulate.hpp — emulated heterogeneity for tests and benchmarks on one machine.
//
// --emulate-speed 1,1,0.5,0.25 makes rank r sleep (1/s_r − 1) × the time its device spent computing the
// step, so it looks s_r times as fast. --emulate-schedule STEP:RANK:SPEED[,...] changes rank RANK's speed
// to SPEED from step STEP on. This is NOT real hardware: describe() says so and belongs in every log.
//
// What is multiplied matters when ranks share cores (docs/architecture.md, "Emulated heterogeneity"): a CPU
// rank passes the CPU time its compute thread used, not the wall time, so time spent descheduled while
// other ranks run is not multiplied by 1/s (a slow GPU is slow on its own, whatever its host does), and
// set-up steps (kernel JIT, first allocations) are not emulated at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::dist {

class SpeedEmulator {
 public:
  SpeedEmulator() = default;  // inactive: every speed 1
  // speeds: "" (all 1) or exactly n comma-separated values in (0, 1] (relative to the fastest rank: a
  // sleep can only slow down); schedule: "" or "STEP:RANK:SPEED,..." with the same bounds.
  // Throws hetrain::Error naming --emulate-speed / --emulate-schedule on bad input.
  SpeedEmulator(const std::string& speeds, const std::string& schedule, int n);

  bool active() const { return active_; }
  double speed(int rank, int64_t step) const;
  // (1/s − 1)·compute_seconds of rank `rank` at step `step`.
  double sleep_seconds(int rank, int64_t step, double compute_seconds) const;
  // Sleeps sleep_seconds(...) and returns the seconds slept. `setup_step`: a step whose time is mostly
  // one-off set-up (the process's first, one that made kernels for a new batch size): no sleep
  // (multiplying set-up by 1/s starved slow ranks in short runs and tripped the stall watchdog).
  double apply(int rank, int64_t step, double compute_seconds, bool setup_step = false) const;
  // "EMULATED heterogeneity (sleeps, not real hardware): speeds [1, 1, 0.5, 0.25]; from step 100 rank 1 → 0.333"
  std::string describe() const;

  // CPU seconds the calling thread has used (what a CPU rank's compute is emulated from).
  static double thread_cpu_seconds();

  struct Change {
    int64_t step;
    int rank;
    double speed;
  };

 private:
  int n_ = 0;
  bool active_ = false;
  std::vector<double> speeds_;
  std::vector<Change> changes_;  // sorted by step (stable)
};

}  // namespace hetrain::dist
