// One training loop for every mode (docs/architecture.md, "Training loop"). The loop owns what every mode
// does alike: the run's clock, the validation points (--val-every-samples) and the epoch's validation, the
// metrics line, when a collective checkpoint is written, the final validation and the order of the last
// steps (checkpoint, summary, outputs). A mode (TrainingMode) supplies what differs: which samples a rank
// trains next and how its result is combined (sync: the weighted reduction of the whole job; async and
// hybrid: trades with the elastic center), what its checkpoint and its evaluated model are taken from, and
// what rank 0 announces and reports. A new mode is one class of that interface and its tests.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "hetrain/dist.hpp"
#include "hetrain/train.hpp"
#include "train/checkpointer.hpp"
#include "train/evaluate.hpp"
#include "train/outputs.hpp"
#include "train/setup.hpp"
#include "train/shared_step.hpp"

namespace hetrain::train {

// What the loop and the mode share: the configuration, the set-up, the outputs, the checkpoints and the
// run's clock.
struct TrainingRun {
  explicit TrainingRun(const TrainConfig& config);
  const TrainConfig& cfg;
  dist::World& world;
  Setup s;
  Outputs outputs;
  Checkpointer checkpointer;
  Clock::time_point start;          // set by the loop after the mode's begin()
  double validation_seconds = 0;    // spent validating, left out of the training clock
  // Seconds since the start, less the time spent validating: the clock of the validation lines.
  double training_seconds() const { return seconds_since(start) - validation_seconds; }
  // Rank 0 prints the run's lines unless --quiet.
  bool prints() const { return world.rank() == 0 && !cfg.quiet; }
};

// What one call of TrainingMode::step did, the same on every rank.
struct StepEnd {
  bool finished = false;        // nothing is left to train: the loop ends
  bool stop_signal = false;     // a rank received a stop signal: the loop ends
  bool stop_here = false;       // --stop-at-step: the loop ends
  int64_t position_before = 0;  // the run's samples (epochs x N) passed before this call
  int64_t position = 0;         // and after it: the validation points in (position_before, position] follow
  int64_t epoch_ended = -1;     // the epoch this step ended (its validation replaces the points), or -1
  bool checkpoint_due = false;  // a collective checkpoint follows this step
  std::optional<StepRecord> record;  // the metrics line (written after the validation, which it carries)
  bool stopping() const { return stop_signal || stop_here; }
};

// What TrainingMode::end left for the loop's last steps.
struct RunEnd {
  int64_t final_validation_at = -1;  // the final model is validated as at this sample (-1: not)
  double train_seconds = 0;          // the clock of that validation's line
  bool checkpoint_due = false;       // a final collective checkpoint follows
};

// What differs between the modes. Every call is made on every rank, in the same order.
class TrainingMode {
 public:
  virtual ~TrainingMode() = default;
  // Rank 0's start-up lines (and any collective the announcement needs).
  virtual void announce() = 0;
  // Collective: before the first step (hooks, windows, the first requests).
  virtual void begin() = 0;
  // The next step; sets result.steps and the other per-step fields of `result` it owns.
  virtual StepEnd step(TrainResult& result) = 0;
  // Samples between validation points: --val-every-samples, or what the mode uses without it (0: none).
  virtual int64_t validation_every() const = 0;
  // Collective: the model this mode evaluates (sync: the replicas; async/hybrid: the center), validated as
  // at sample `point` of the run.
  virtual EvalTotals evaluate(int64_t point) = 0;
  // Collective: the replicas' batch-norm statistics made one set (train/running_stats.hpp).
  virtual void average_running_stats() = 0;
  // Collective, after end() when it asks for a final validation: the final model's (by default the model as
  // it stands; async/hybrid with --ema-decay: the center's moving average).
  virtual EvalTotals evaluate_final(TrainingRun& run);
  // Collective: a checkpoint of the run as it stands after the last step.
  virtual void save_checkpoint() = 0;
  // Collective: after the last step; sets the result's totals.
  virtual RunEnd end(TrainResult& result) = 0;
  // Rank 0's last lines.
  virtual void summary(const TrainResult& result) = 0;
  // Collective: releases what the mode holds open across ranks.
  virtual void close() {}
};

using ModeFactory = std::function<std::unique_ptr<TrainingMode>(TrainingRun&)>;
std::unique_ptr<TrainingMode> make_sync_mode(TrainingRun& run);      // train/sync_mode.cpp
std::unique_ptr<TrainingMode> make_elastic_mode(TrainingRun& run);   // train/elastic_mode.cpp: async, hybrid
// The mode --mode names (run.s.mode).
std::unique_ptr<TrainingMode> make_mode(TrainingRun& run);

class TrainingLoop {
 public:
  // Collective: the set-up (make_setup) and the mode. `factory` is make_mode but for tests.
  explicit TrainingLoop(const TrainConfig& cfg, const ModeFactory& factory = make_mode);
  TrainResult run();

 private:
  void follow_up(StepEnd& end, TrainResult& result);
  void validate_points(const StepEnd& end);
  void end_epoch(int64_t epoch, TrainResult& result, StepEnd& end);
  void finish(TrainResult& result);

  TrainingRun run_;
  std::unique_ptr<TrainingMode> mode_;
  int64_t next_point_ = -1;  // the next validation point; -1 until the first step
};

}  // namespace hetrain::train
