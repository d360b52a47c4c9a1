#include "train/sync_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "train/shared_step.hpp"

namespace hetrain::train {
namespace {

// A loss that sits at ln K this many logged steps in a row is the model not learning.
constexpr int64_t kChanceSteps = 100;
// Data wait above this share of the step time marks a progress line reader-bound.
constexpr double kReaderBound = 0.02;

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
  return os.str();
}

std::string pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * x);
  return buf;
}

}  // namespace

std::string duration_text(double seconds) {
  char buf[32];
  const long long t = (long long)std::llround(std::max(0.0, seconds));
  if (t < 60) std::snprintf(buf, sizeof buf, "%llds", t);
  else if (t < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t / 60) % 60);
  return buf;
}

void SyncReport::announce(const Checkpointer& checkpointer) const {
  const std::string table = world_.rank_table(s_.device);
  if (world_.rank() != 0) return;
  print_notes(s_.notes);
  std::fflush(stdout);
  if (cfg_.quiet) return;
  const auto& info = s_.train->info();
  std::printf("hetrain: %d rank(s)\n%s", world_.size(), table.c_str());
  std::printf("data: %s — %lld samples, %dx%dx%d, %d classes%s\n", info.path.c_str(),
              (long long)info.num_samples, info.channels, info.height, info.width, info.num_classes,
              s_.val ? (", validation " + std::to_string(s_.val->info().num_samples) + " samples").c_str() : "");
  const std::string accumulated = cfg_.accumulate > 1 ? " x " + std::to_string(cfg_.accumulate) + " accumulated = " +
                                                           std::to_string(cfg_.step_batch()) + " per step"
                                                     : "";
  std::printf("model: %s, %lld parameters; global batch %lld%s, %lld steps/epoch, %d epoch(s), %s\n",
              cfg_.model.c_str(), (long long)s_.model->param_count(), (long long)cfg_.global_batch,
              accumulated.c_str(), (long long)s_.plan->steps_per_epoch(), cfg_.epochs, schedule_text(s_).c_str());
  std::printf("gradients: %s reduction, %s%s\n", s_.comm->name(), buckets_text().c_str(),
              dist::is_16bit(s_.wire) ? (std::string(", ") + dist::wire_name(s_.wire) + " on the wire (--reduce-precision)").c_str() : "");
  if (cfg_.precision != Precision::FP32) std::printf("%s\n", precision_text(cfg_.precision).c_str());
  if (checkpointer.enabled())
    std::printf("checkpoints: %s, %s, newest %d kept\n", cfg_.checkpoint_dir.c_str(), checkpoint_interval().c_str(),
                cfg_.keep_checkpoints);
  if (s_.start_step > s_.total_steps)
    std::printf("resuming at step %lld, past this run's last step %lld: nothing left to train\n",
                (long long)s_.start_step, (long long)s_.total_steps);
  else if (s_.start_step > 0)
    std::printf("resuming at step %lld of %lld (epoch %lld)\n", (long long)s_.start_step, (long long)s_.total_steps,
                (long long)(s_.start_step / s_.plan->steps_per_epoch() + 1));
  if (s_.emulator.active()) std::printf("%s\n", s_.emulator.describe().c_str());
  if (!s_.fixed_split.empty())
    std::printf("balance: fixed split %s\n", join(s_.fixed_split).c_str());
  else
    std::printf("balance: %s, initial split %s\n", dist::balance_mode_name(s_.balancer->planner().config().mode),
                join(s_.balancer->split()).c_str());
  std::fflush(stdout);
}

void SyncReport::add(double loss_sum, double correct, double count) {
  loss_sum_ += loss_sum;
  correct_ += correct;
  count_ += count;
}

void SyncReport::step(const StepRecord& rec, TrainResult& result, bool stopping) {
  double wait = 0;
  for (const StepTimes& t : rec.ranks) wait = std::max(wait, t.wait);
  if (first_step_done_) {  // the first step waits for the pipeline to fill: not the reader's pace
    run_wait_ += wait;
    run_time_ += rec.step_seconds;
    wait_sum_ += wait;
    wait_time_ += rec.step_seconds;
  }
  first_step_done_ = true;
  memory_peaks_.resize(rec.ranks.size());
  for (size_t r = 0; r < rec.ranks.size(); ++r) {
    MemoryFigures& p = memory_peaks_[r];
    p.host_peak_mib = std::max(p.host_peak_mib, rec.ranks[r].memory.host_peak_mib);
    p.device_peak_mib = std::max(p.device_peak_mib, rec.ranks[r].memory.device_peak_mib);
  }
  eff_sum_ += rec.balance_efficiency();
  time_sum_ += rec.step_seconds;
  samples_sum_ += rec.global_batch();
  ++window_steps_;
  const bool log_now = cfg_.log_every > 0 && (rec.step + 1) % cfg_.log_every == 0;
  const bool last = rec.step + 1 == s_.total_steps || stopping;
  if (!log_now && !last) return;
  result.final_loss = loss_sum_ / std::max(1.0, count_);
  const double step_s = time_sum_ / std::max<int64_t>(1, window_steps_);
  const int64_t spe = s_.plan->steps_per_epoch();
  // A reader that cannot keep up says so on the line: the fix is more decode or CPU threads, not the balancer.
  char reader[96] = "";
  const double wait_share = wait_sum_ / std::max(1e-9, wait_time_);
  if (wait_share > kReaderBound)
    std::snprintf(reader, sizeof reader, "  reader-bound: data wait %.0f%% of the step (--decode-threads)",
                  100.0 * wait_share);
  if (!cfg_.quiet)
    std::printf("step %lld/%lld  epoch %.2f/%lld  loss %.4f%s  lr %.4g  %8.1f samples/s  balance %5.1f%%"
                "  ETA %s%s\n",
                (long long)rec.step + 1, (long long)s_.total_steps, double(rec.step + 1) / double(spe),
                (long long)((s_.total_steps + spe - 1) / spe), result.final_loss,
                accuracy_text(correct_ / std::max(1.0, count_)).c_str(), rec.lr,
                time_sum_ > 0 ? samples_sum_ / time_sum_ : 0.0, 100.0 * eff_sum_ / window_steps_,
                duration_text(step_s * double(s_.total_steps - rec.step - 1)).c_str(), reader);
  if (!s_.detection) warn_if_at_chance(result.final_loss);  // a classifier's chance level is ln(classes)
  std::fflush(stdout);
  loss_sum_ = correct_ = count_ = 0;
  eff_sum_ = time_sum_ = wait_sum_ = wait_time_ = 0;
  samples_sum_ = 0;
  window_steps_ = 0;
}

void SyncReport::summary(const TrainResult& result, double timed_seconds, double timed_exposed) const {
  if (world_.rank() != 0 || cfg_.quiet) return;
  if (world_.size() > 1 && timed_seconds > 0)
    std::printf("gradients: reduction exposed %.1f%% of step time (the rank that waited longest, after the first "
                "step)\n", 100.0 * timed_exposed / timed_seconds);
  if (run_time_ > 0)
    std::printf("data: the reader kept the model waiting %.2f%% of the step time (the rank that waited longest, "
                "after the first step)\n", 100.0 * run_wait_ / run_time_);
  if (s_.loss_scaler.active())
    std::printf("fp16: %lld step(s) skipped for overflow, loss scale %g\n", (long long)s_.loss_scaler.skipped(),
                s_.loss_scaler.scale());
  if (!memory_peaks_.empty()) std::printf("%s\n", memory_summary(memory_peaks_).c_str());
  if (result.steps == s_.start_step && s_.start_step > s_.total_steps)  // resumed past a shorter run's end
    std::printf("done: nothing left to train, the checkpoint was at step %lld, past this run's last step %lld\n",
                (long long)result.steps, (long long)s_.total_steps);
  else if (result.steps == s_.start_step)  // resumed at the end: no rate, no loss
    std::printf("done: nothing left to train, the run was already at step %lld of %lld\n",
                (long long)result.steps, (long long)s_.total_steps);
  else {
    // The first step warms up and is not timed: a run of one step has no rate to show.
    char rate[64] = "no rate (the first step is not timed)";
    if (result.samples_per_second > 0)
      std::snprintf(rate, sizeof rate, "%.1f samples/s (after the first step)", result.samples_per_second);
    std::printf("done: %lld %s, %s, final train loss %.4f%s\n", (long long)result.steps,
                result.steps == 1 ? "step" : "steps", rate, result.final_loss, val_text(result.val_accuracy).c_str());
  }
}

// A progress line's training accuracy, "  acc  91.20%"; nothing for a detector (it is scored by mAP).
std::string SyncReport::accuracy_text(double accuracy) const {
  if (s_.detection) return "";
  char text[24];
  std::snprintf(text, sizeof text, "  acc %6.2f%%", 100.0 * accuracy);
  return text;
}

// The run's last line: ", val accuracy 91.20%", ", val mAP@0.5 0.5120" for a detector, "" without validation.
std::string SyncReport::val_text(double headline) const {
  if (headline < 0) return "";
  if (s_.detection) {
    char text[48];
    std::snprintf(text, sizeof text, ", val mAP@0.5 %.4f", headline);
    return text;
  }
  return ", val accuracy " + pct(headline);
}

std::string SyncReport::buckets_text() const {
  if (s_.powersgd) {
    const dist::PowerSgd& p = *s_.powersgd;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "PowerSGD rank %d %s%s: %lld weight matrices (%.1f%% of the parameters) as factors, "
                  "%lld floats a step instead of %lld (1/%.0f)%s",
                  p.rank(),
                  s_.powersgd_q_comm ? ("in " + std::to_string(p.buckets()) + " bucket(s) during backward").c_str()
                                     : "after backward",
                  cfg_.compress_start > 0 ? (" from step " + std::to_string(cfg_.compress_start)).c_str() : "",
                  (long long)p.compressed_matrices(), 100.0 * double(p.compressed_floats()) / double(p.parameters()),
                  (long long)p.floats_sent(), (long long)p.parameters(),
                  double(p.parameters()) / double(p.floats_sent()),
                  cfg_.compress_start > 0 ? (s_.buckets ? "; whole before, in buckets" : "; whole before") : "");
    return buf;
  }
  if (!s_.buckets) return "one after backward (--bucket-mb 0)";
  char buf[160];
  std::snprintf(buf, sizeof buf, "%zu bucket(s) of about %g MiB %s", s_.buckets->buckets().size(), cfg_.bucket_mb,
                s_.comm->overlaps() ? "started during backward" : "reduced after backward (this backend does not overlap)");
  return buf;
}

std::string SyncReport::checkpoint_interval() const {
  std::string out;
  if (cfg_.checkpoint_every > 0) out = std::to_string(cfg_.checkpoint_every) + " steps";
  if (cfg_.checkpoint_minutes > 0) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%g minutes", out.empty() ? "" : " and ", cfg_.checkpoint_minutes);
    out += buf;
  }
  return out.empty() ? "at the end only (and on a stop signal)" : "every " + out + " and at the end";
}

// A loss that stays at ln K (uniform guessing over K classes) for many steps means the model is not
// learning at all, most often a learning rate too high for the model: say so once instead of training on.
void SyncReport::warn_if_at_chance(double window_loss) {
  const double chance = std::log(double(std::max(2, s_.train->info().num_classes)));
  chance_steps_ = std::abs(window_loss - chance) < 0.01 * chance ? chance_steps_ + window_steps_ : 0;
  if (chance_warned_ || chance_steps_ < kChanceSteps) return;
  chance_warned_ = true;
  std::printf("warning: the training loss has stayed at chance level (ln %d = %.3f) for %lld steps: the model is "
              "not learning; try a lower --lr (e.g. a fifth) or --warmup-epochs\n",
              s_.train->info().num_classes, chance, (long long)chance_steps_);
}

}  // namespace hetrain::train
