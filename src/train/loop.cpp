// The training loop every mode shares (train/loop.hpp; docs/architecture.md, "Training loop").
#include "train/loop.hpp"

#include <algorithm>
#include <cstdio>

#include "train/stop_signals.hpp"

namespace hetrain::train {

TrainingRun::TrainingRun(const TrainConfig& config)
    : cfg(config),
      world(dist::World::get()),
      s(make_setup(config, world)),
      outputs(config, world),
      checkpointer(config, world, s.prunable_checkpoints) {}

std::unique_ptr<TrainingMode> make_mode(TrainingRun& run) {
  return is_elastic(run.s.mode) ? make_elastic_mode(run) : make_sync_mode(run);
}

TrainingLoop::TrainingLoop(const TrainConfig& cfg, const ModeFactory& factory) : run_(cfg), mode_(factory(run_)) {}

TrainResult TrainingLoop::run() {
  mode_->announce();
  mode_->begin();
  run_.start = Clock::now();
  TrainResult result;
  result.steps = run_.s.start_step;
  while (true) {
    StepEnd end = mode_->step(result);
    follow_up(end, result);
    // Once a checkpoint has been timed, the checkpointer warns if a stop's would outlast mpirun's grace.
    if (run_.checkpointer.last_step() >= 0) disarm_stop_warning();
    if (end.finished || end.stopping()) {
      result.stopped_by_signal = end.stop_signal;
      // A stop writes its checkpoint (follow_up) whenever there is a --checkpoint-dir; a failed write throws.
      result.stop_checkpointed = end.stop_signal && run_.checkpointer.enabled();
      break;
    }
  }
  finish(result);
  return result;
}

// What follows every step: the validation points it passed (or its epoch's validation), the metrics line
// that carries them, and a checkpoint when the mode says one is due.
void TrainingLoop::follow_up(StepEnd& end, TrainResult& result) {
  if (end.epoch_ended >= 0)
    end_epoch(end.epoch_ended, result, end);
  else
    validate_points(end);
  if (end.record) run_.outputs.write_metrics(*end.record);  // rank 0
  if (end.checkpoint_due) mode_->save_checkpoint();
}

// --val-every-samples (or the mode's own interval): one validation at each point the step passed. The
// ranks wait for each other here, so this time, like the evaluation, is left out of the training clock.
void TrainingLoop::validate_points(const StepEnd& end) {
  const int64_t every = mode_->validation_every();
  if (!run_.s.val || every <= 0) return;
  // Points at or before the step's start were passed by earlier steps or by the run this one resumes.
  next_point_ = std::max(next_point_, (end.position_before / every + 1) * every);
  for (; next_point_ <= end.position; next_point_ += every) {
    const auto start = Clock::now();
    const double clock = run_.training_seconds();
    const EvalTotals e = mode_->evaluate(next_point_);
    if (run_.prints()) print_validation(next_point_, run_.s.train->info().num_samples, clock, e);
    run_.validation_seconds += seconds_since(start);
  }
}

// The end of an epoch: the batch-norm statistics made one set, and the validation whose figures the
// step's metrics line carries. Points passed in the same step need no validation of their own (the next
// step starts past them).
void TrainingLoop::end_epoch(int64_t epoch, TrainResult& result, StepEnd& end) {
  if (!run_.s.val) {
    mode_->average_running_stats();
    return;
  }
  const auto start = Clock::now();
  const double clock = run_.training_seconds();
  const EvalTotals e = mode_->evaluate(end.position);
  run_.validation_seconds += seconds_since(start);
  result.val_accuracy = e.headline();
  const double val_loss = e.loss_sum / std::max(1.0, e.count);
  if (end.record) end.record->val_accuracy = result.val_accuracy, end.record->val_loss = val_loss;
  if (run_.prints()) {
    const int64_t n = run_.s.train->info().num_samples;
    std::printf("epoch %lld: validation loss %.4f, %s (%lld samples)\n", (long long)epoch + 1, val_loss,
                e.score_text().c_str(), (long long)e.count);
    if (mode_->validation_every() > 0) print_validation((epoch + 1) * n, n, clock, e);  // the form every mode prints
    std::fflush(stdout);
  }
}

EvalTotals TrainingMode::evaluate_final(TrainingRun& run) { return validate(run.s, run.world.comm()); }

// After the last step: the mode's own ending, the final model's validation, the last checkpoint, rank 0's
// summary, the outputs (every rank learns whether they were written before anyone finalizes).
void TrainingLoop::finish(TrainResult& result) {
  const RunEnd end = mode_->end(result);
  Setup& s = run_.s;
  if (end.final_validation_at >= 0 && s.val) {
    const EvalTotals e = mode_->evaluate_final(run_);
    result.val_accuracy = e.headline();
    if (run_.prints()) print_validation(end.final_validation_at, s.train->info().num_samples, end.train_seconds, e);
  }
  if (end.checkpoint_due) mode_->save_checkpoint();
  mode_->summary(result);
  run_.outputs.finish(s.model->params());
  mode_->close();
  s.arrival->close();
}

TrainResult run_training(const TrainConfig& config) {
  install_stop_handlers();
  TrainingLoop loop(config);
  if (dist::World::get().rank() == 0) arm_stop_warning(!config.checkpoint_dir.empty());
  return loop.run();
}

}  // namespace hetrain::train
