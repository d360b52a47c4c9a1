// The training loop (src/train/loop.cpp) with a scripted mode: what it does after each step (validation
// points, the epoch's validation, checkpoints), how it ends (stop, the final validation and checkpoint, the
// order of the last calls); and the two real modes through it, on every rank of the job.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "train/loop.hpp"

using namespace hetrain;
using namespace hetrain::train;

namespace {

TrainConfig small_config() {
  dist::World::init(nullptr, nullptr);  // adopts the MPI that the test main started
  TrainConfig cfg;
  cfg.model = "lenet";
  cfg.synthetic = 256;
  cfg.synthetic_val = 64;
  cfg.synthetic_shape = {1, 28, 28};
  cfg.global_batch = 32;
  cfg.device = "cpu";
  cfg.quiet = true;
  cfg.stall_timeout = 60;
  return cfg;
}

// A mode that plays back a list of steps and writes down every call the loop makes.
class ScriptedMode final : public TrainingMode {
 public:
  ScriptedMode(std::vector<StepEnd> steps, int64_t every, std::vector<std::string>& calls)
      : steps_(std::move(steps)), every_(every), calls_(calls) {}
  void announce() override { calls_.push_back("announce"); }
  void begin() override { calls_.push_back("begin"); }
  StepEnd step(TrainResult& result) override {
    StepEnd end = steps_.at(next_++);
    calls_.push_back("step " + std::to_string(end.position));
    result.steps = int64_t(next_);
    return end;
  }
  int64_t validation_every() const override { return every_; }
  EvalTotals evaluate(int64_t point) override {
    calls_.push_back("evaluate " + std::to_string(point));
    EvalTotals e;
    e.count = 1, e.top1 = 0.5;
    return e;
  }
  void average_running_stats() override { calls_.push_back("average"); }
  void save_checkpoint() override { calls_.push_back("checkpoint"); }
  RunEnd end(TrainResult&) override {
    calls_.push_back("end");
    RunEnd end;
    end.final_validation_at = final_at;
    end.checkpoint_due = final_checkpoint;
    return end;
  }
  void summary(const TrainResult&) override { calls_.push_back("summary"); }
  void close() override { calls_.push_back("close"); }

  int64_t final_at = -1;
  bool final_checkpoint = false;

 private:
  std::vector<StepEnd> steps_;
  size_t next_ = 0;
  int64_t every_;
  std::vector<std::string>& calls_;
};

StepEnd step_to(int64_t before, int64_t after) {
  StepEnd end;
  end.position_before = before, end.position = after;
  return end;
}

std::string joined(const std::vector<std::string>& calls) {
  std::string text;
  for (const std::string& c : calls) text += (text.empty() ? "" : ", ") + c;
  return text;
}

TrainResult run_scripted(const TrainConfig& cfg, std::vector<StepEnd> steps, int64_t every,
                         std::vector<std::string>& calls, int64_t final_at = -1, bool final_checkpoint = false) {
  TrainingLoop loop(cfg, [&](TrainingRun&) {
    auto mode = std::make_unique<ScriptedMode>(std::move(steps), every, calls);
    mode->final_at = final_at, mode->final_checkpoint = final_checkpoint;
    return mode;
  });
  return loop.run();
}

}  // namespace

TEST(TrainingLoop, ValidatesOnceAtEveryPointAStepPassesAndNotAtItsStart) {
  std::vector<StepEnd> steps = {step_to(0, 32), step_to(32, 64), step_to(64, 160), step_to(160, 192)};
  steps.back().finished = true;
  std::vector<std::string> calls;
  run_scripted(small_config(), steps, 48, calls);
  EXPECT_EQ(joined(calls),
            "announce, begin, step 32, step 64, evaluate 48, step 160, evaluate 96, evaluate 144, step 192, "
            "evaluate 192, end, summary, close");
}

TEST(TrainingLoop, AResumedRunSkipsThePointsBeforeItsFirstStep) {
  std::vector<StepEnd> steps = {step_to(100, 132), step_to(132, 164)};
  steps.back().finished = true;
  std::vector<std::string> calls;
  run_scripted(small_config(), steps, 48, calls);
  EXPECT_EQ(joined(calls), "announce, begin, step 132, step 164, evaluate 144, end, summary, close");
}

TEST(TrainingLoop, AnEpochsEndValidatesInsteadOfItsPointsAndFillsTheMetricsRecord) {
  std::vector<StepEnd> steps = {step_to(192, 256), step_to(256, 288)};
  steps[0].epoch_ended = 0;
  steps[0].record = StepRecord{};
  steps.back().finished = true;
  std::vector<std::string> calls;
  const TrainResult result = run_scripted(small_config(), steps, 48, calls);
  // The points 240 and 288 of the epoch's last step are covered by the epoch's validation at 256; the
  // next step starts past them.
  EXPECT_EQ(joined(calls), "announce, begin, step 256, evaluate 256, step 288, evaluate 288, end, summary, close");
  EXPECT_DOUBLE_EQ(result.val_accuracy, 0.5);
}

TEST(TrainingLoop, WithoutAValidationSetAnEpochsEndStillAveragesTheStatistics) {
  TrainConfig cfg = small_config();
  cfg.synthetic_val = 0;
  std::vector<StepEnd> steps = {step_to(0, 256)};
  steps[0].epoch_ended = 0, steps[0].finished = true;
  std::vector<std::string> calls;
  run_scripted(cfg, steps, 48, calls);
  EXPECT_EQ(joined(calls), "announce, begin, step 256, average, end, summary, close");
}

TEST(TrainingLoop, AStopEndsTheStepsAfterTheirCheckpointThenTheFinalOnesFollow) {
  std::vector<StepEnd> steps = {step_to(0, 32), step_to(32, 64), step_to(64, 96)};
  steps[1].stop_signal = true, steps[1].checkpoint_due = true;
  std::vector<std::string> calls;
  const TrainResult result = run_scripted(small_config(), steps, 0, calls, /*final_at=*/64, /*final_checkpoint=*/true);
  EXPECT_EQ(joined(calls), "announce, begin, step 32, step 64, checkpoint, end, checkpoint, summary, close");
  EXPECT_TRUE(result.stopped_by_signal);
  EXPECT_GE(result.val_accuracy, 0.0) << "the final validation ran";
}

// The real modes through the loop: every sample of the run trained once, the replicas left identical.
class LoopModes : public ::testing::TestWithParam<const char*> {};

TEST_P(LoopModes, TrainTheWholeRunAndReportIt) {
  TrainConfig cfg = small_config();
  cfg.mode = GetParam();
  cfg.epochs = 2;
  cfg.lr = 0.01f;
  const TrainResult result = run_training(cfg);
  EXPECT_EQ(result.steps, 2 * 256 / 32);
  EXPECT_FALSE(result.stopped_by_signal);
  EXPECT_GT(result.val_accuracy, 0.0);
  EXPECT_GT(result.samples_per_second, 0.0);
}

INSTANTIATE_TEST_SUITE_P(Modes, LoopModes, ::testing::Values("sync", "async", "hybrid"));
