// What rank 0 prints in the synchronous mode: the announcement before the first step, the progress line
// every --log-every steps (with the warning of a loss stuck at chance level) and the last lines of the run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/train.hpp"
#include "train/checkpointer.hpp"
#include "train/report.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

class SyncReport {
 public:
  SyncReport(const TrainConfig& cfg, const Setup& s, const dist::World& world) : cfg_(cfg), s_(s), world_(world) {}

  // Collective (the rank table); rank 0 prints the notes and, unless --quiet, what the run will do.
  void announce(const Checkpointer& checkpointer) const;
  // A step's loss, correct count and samples, summed over the ranks: the window of the next progress line.
  void add(double loss_sum, double correct, double count);
  // Rank 0, after each step: the progress line when one is due (every --log-every steps, the last step, a
  // stop); sets result.final_loss to the window's mean loss then.
  void step(const StepRecord& rec, TrainResult& result, bool stopping);
  // Rank 0: the run's last lines. `timed_*`: the steps after the first (train/sync_mode.cpp).
  void summary(const TrainResult& result, double timed_seconds, double timed_exposed) const;

 private:
  std::string accuracy_text(double accuracy) const;
  std::string val_text(double headline) const;
  std::string buckets_text() const;
  std::string checkpoint_interval() const;
  void warn_if_at_chance(double window_loss);

  const TrainConfig& cfg_;
  const Setup& s_;
  const dist::World& world_;
  double loss_sum_ = 0, correct_ = 0, count_ = 0;  // the window since the last progress line
  double eff_sum_ = 0, time_sum_ = 0;
  double wait_sum_ = 0, wait_time_ = 0;  // per step, the data wait of the rank that waited longest, and the
                                         // steps' time (both without the run's first step)
  int64_t samples_sum_ = 0, window_steps_ = 0;
  double run_wait_ = 0, run_time_ = 0;  // the same over the run, after its first step
  bool first_step_done_ = false;
  int64_t chance_steps_ = 0;  // consecutive logged steps whose loss sat at ln K
  bool chance_warned_ = false;
  std::vector<MemoryFigures> memory_peaks_;  // rank 0: each rank's highest figures so far
};

// "45s", "12m05s", "3h07m": a remaining time.
std::string duration_text(double seconds);

}  // namespace hetrain::train
