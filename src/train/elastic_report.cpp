#include "train/elastic_report.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "hetrain/error.hpp"
#include "train/shared_step.hpp"

namespace hetrain::train {

void ElasticReport::announce(const std::vector<int64_t>& batches) const {
  const std::string table = world_.rank_table(
      s_.mode == Mode::Hybrid ? s_.device + ", group " + std::to_string(group_.number(group_.leader())) : s_.device);
  const std::vector<int>& leaders = group_.leaders();
  if (world_.rank() != 0) return;
  print_notes(s_.notes);
  if (!cfg_.quiet) {
    const auto& info = s_.train->info();
    std::printf("hetrain: %d rank(s), mode %s\n%s", world_.size(), mode_name(s_.mode), table.c_str());
    std::printf("data: %s — %lld samples, %dx%dx%d, %d classes\n", info.path.c_str(), (long long)info.num_samples,
                info.channels, info.height, info.width, info.num_classes);
    std::printf("model: %s, %lld parameters; %d epoch(s) = %lld samples, lr schedule in steps of %lld samples, "
                "%s\n",
                cfg_.model.c_str(), (long long)s_.model->param_count(), cfg_.epochs, (long long)total_samples_,
                (long long)cfg_.step_batch(), schedule_text(s_).c_str());
    std::string groups;
    for (int r = 0; r < world_.size(); ++r) {
      if (leaders[size_t(r)] != r) continue;
      groups += groups.empty() ? "{" : " {";
      bool first = true;
      for (int q = 0; q < world_.size(); ++q)
        if (leaders[size_t(q)] == r) groups += (first ? "" : ",") + std::to_string(q), first = false;
      groups += "}";
    }
    std::string local;
    for (size_t r = 0; r < batches.size(); ++r) local += (r ? ", " : "") + std::to_string(batches[r]);
    std::string speeds;
    const std::vector<double>& measured = group_.speeds();
    for (size_t r = 0; r < measured.size(); ++r) speeds += (r ? ", " : "") + std::to_string(std::lround(measured[r]));
    std::printf("elastic averaging: alpha %g every %d local step(s); groups %s%s; local batches [%s]%s\n",
                cfg_.elastic_alpha, cfg_.elastic_every, groups.c_str(),
                speeds.empty() ? "" : (" by measured speed [" + speeds + "] samples/s").c_str(), local.c_str(),
                dist::is_16bit(s_.wire) ? wire_text().c_str() : "");
    if (cfg_.precision != Precision::FP32) std::printf("%s\n", precision_text(cfg_.precision).c_str());
    if (s_.start_step > 0)
      std::printf("resuming at sample %lld of %lld\n", (long long)s_.start_sample, (long long)total_samples_);
    if (s_.emulator.active()) std::printf("%s\n", s_.emulator.describe().c_str());
  }
  std::fflush(stdout);
}

// What --reduce-precision changes in these modes, for the start-up line.
std::string ElasticReport::wire_text() const {
  const std::string w = dist::wire_name(s_.wire);
  return "; center trades in " + w + " (reads from the owners' " + w + " copies, pushes through their inboxes), " +
         "the center FP32" + (s_.mode == Mode::Hybrid ? ", groups reduce in " + w : std::string());
}

void ElasticReport::start(int64_t position, std::vector<dist::SampleCounter::RankStats> stats) {
  time_ = Clock::now();
  position_ = position;
  stats_ = std::move(stats);
}

void ElasticReport::add_step(double loss_sum, double correct, int64_t samples, float lr) {
  loss_sum_ += loss_sum;
  correct_ += correct;
  count_ += double(samples);
  lr_ = lr;
}

void ElasticReport::report(int64_t position, int64_t local_steps, dist::SampleCounter& counter, Outputs& outputs) {
  const int every = std::max(1, cfg_.log_every);
  const bool print = !cfg_.quiet && cfg_.log_every > 0;
  if ((!print && !outputs.writes_metrics()) || local_steps % every != 0) return;
  const auto now = Clock::now();
  const double seconds = std::chrono::duration<double>(now - time_).count();
  const std::vector<dist::SampleCounter::RankStats> stats = counter.stats();
  std::vector<double> group_samples;
  double pushes = 0, staleness = 0;
  const ElasticRecord rec = window_record(position, seconds, stats, group_samples, pushes, staleness);
  outputs.write_metrics(rec);
  stats_ = stats;
  if (print) print_line(position, seconds, rec, group_samples, pushes, staleness);
  time_ = now;
  position_ = position;
  loss_sum_ = correct_ = count_ = 0;
  compute_ = wait_ = comm_ = 0;
}

// The metrics line of the window: rank 0's group's loss, every rank's figures since the last line;
// `group_samples` (by leader), `pushes` and `staleness` summed over the ranks for the progress line.
ElasticRecord ElasticReport::window_record(int64_t position, double seconds,
                                           const std::vector<dist::SampleCounter::RankStats>& stats,
                                           std::vector<double>& group_samples, double& pushes, double& staleness) {
  const int n = world_.size();
  const std::vector<int>& leaders = group_.leaders();
  ElasticRecord rec;
  rec.mode = mode_name(s_.mode);
  rec.samples = position;
  rec.step = position / cfg_.step_batch();
  rec.epoch = position / s_.train->info().num_samples;
  rec.loss = last_loss_ = loss_sum_ / std::max(1.0, count_);
  rec.accuracy = correct_ / std::max(1.0, count_);
  rec.lr = lr_;
  rec.loss_scale = s_.loss_scaler.active() ? s_.loss_scaler.scale() : 0;
  rec.window_s = seconds;
  rec.val_loss = val_loss_, rec.val_accuracy = val_accuracy_;
  val_loss_ = val_accuracy_ = -1;
  rec.ranks.resize(size_t(n));
  group_samples.assign(size_t(n), 0.0);
  for (int r = 0; r < n; ++r) {
    const auto& now_r = stats[size_t(r)];
    const auto& then = stats_[size_t(r)];
    ElasticRecord::Rank& k = rec.ranks[size_t(r)];
    k.group = group_.number(leaders[size_t(r)]);
    k.samples = double(now_r.samples - then.samples);
    k.pushes = double(now_r.pushes - then.pushes);
    k.staleness = double(now_r.staleness - then.staleness);
    k.compute = 1e-6 * double(now_r.compute_us - then.compute_us);
    k.wait = 1e-6 * double(now_r.wait_us - then.wait_us);
    k.comm = 1e-6 * double(now_r.comm_us - then.comm_us);
    k.idle = 1e-6 * double(now_r.idle_us - then.idle_us);
    k.skipped = double(now_r.skipped - then.skipped);
    constexpr double kMiB = 1024.0 * 1024.0;  // levels, not counts (SampleCounter::RankStats)
    k.memory = {double(now_r.host_bytes) / kMiB, double(now_r.host_peak_bytes) / kMiB,
                double(now_r.device_bytes) / kMiB, double(now_r.device_peak_bytes) / kMiB};
    group_samples[size_t(leaders[size_t(r)])] += k.samples;
    pushes += k.pushes, staleness += k.staleness;
  }
  for (int r = 0; r < n; ++r) rec.ranks[size_t(r)].group_samples = group_samples[size_t(leaders[size_t(r)])];
  return rec;
}

void ElasticReport::print_line(int64_t position, double seconds, const ElasticRecord& rec,
                               const std::vector<double>& group_samples, double pushes, double staleness) const {
  const int n = world_.size();
  const double rate = seconds > 0 ? double(position - position_) / seconds : 0;
  std::string groups;  // hybrid: each group's rate since the last line
  if (s_.mode == Mode::Hybrid) {
    for (int r = 0; r < n; ++r) {
      if (group_.leaders()[size_t(r)] != r) continue;
      char part[64];
      std::snprintf(part, sizeof part, "%s%d: %.0f", groups.empty() ? "" : ", ", group_.number(r),
                    seconds > 0 ? group_samples[size_t(r)] / seconds : 0.0);
      groups += part;
    }
    groups = "  groups [" + groups + "] samples/s";
  }
  char acc[24] = "";  // a detector is scored by mAP, not accuracy
  if (!s_.detection) std::snprintf(acc, sizeof acc, "  acc %6.2f%%", 100.0 * rec.accuracy);
  const int64_t per_epoch = s_.train->info().num_samples;
  // As the synchronous line does: a reader that cannot keep up says so (rank 0's window).
  const double busy = std::max(1e-9, compute_ + wait_ + comm_);
  char reader[96] = "";
  if (wait_ / busy > 0.02)
    std::snprintf(reader, sizeof reader, "  reader-bound: data wait %.0f%% (--decode-threads)", 100.0 * wait_ / busy);
  std::printf("samples %lld/%lld  epoch %.2f/%d  loss %.4f%s  lr %.4g  %8.1f samples/s (all ranks)%s"
              "  staleness %.2f  compute %.0f%%%s\n",
              (long long)position, (long long)total_samples_, double(position) / double(per_epoch), cfg_.epochs,
              rec.loss, acc, lr_, rate, groups.c_str(), pushes > 0 ? staleness / pushes : 0.0,
              100.0 * compute_ / busy, reader);
  std::fflush(stdout);
}

void ElasticReport::summary(const TrainResult& result, bool stopped, bool nothing_left, int64_t samples_done,
                            const CenterTraffic& traffic, bool checkpoints) const {
  double staleness[2] = {traffic.staleness_sum, double(traffic.pushes)};
  HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, staleness, 2, MPI_DOUBLE, MPI_SUM, world_.comm()));
  double op_times[2] = {traffic.median_op(), traffic.slowest_op};  // the rank with the highest of each
  HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, op_times, 2, MPI_DOUBLE, MPI_MAX, world_.comm()));
  // Each reduction (a hybrid group, an async rank) keeps its own scale: the skips are counted per leader.
  double skipped = group_.leads() ? double(s_.loss_scaler.skipped()) : 0.0;
  HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &skipped, 1, MPI_DOUBLE, MPI_SUM, world_.comm()));
  const MemoryFigures mine = memory_figures();
  std::vector<MemoryFigures> memory(size_t(world_.rank() == 0 ? world_.size() : 0));
  constexpr int kDoubles = int(sizeof(MemoryFigures) / sizeof(double));
  HT_MPI_CHECK(MPI_Gather(&mine, kDoubles, MPI_DOUBLE, memory.data(), kDoubles, MPI_DOUBLE, 0, world_.comm()));
  if (world_.rank() != 0) return;
  if (s_.loss_scaler.active() && !cfg_.quiet)
    std::printf("fp16: %lld local step(s) skipped for overflow over all %s, rank 0's loss scale %g\n",
                (long long)skipped, s_.mode == Mode::Hybrid ? "groups" : "ranks", s_.loss_scaler.scale());
  if (stopped)
    std::printf("stopped after %lld of %lld samples (stop signal)%s\n", (long long)samples_done,
                (long long)total_samples_, checkpoints ? "; continue with --resume auto" : "");
  char val[48] = "";
  if (result.val_accuracy >= 0 && s_.detection)
    std::snprintf(val, sizeof val, ", val mAP@0.5 %.4f", result.val_accuracy);
  else if (result.val_accuracy >= 0)
    std::snprintf(val, sizeof val, ", val accuracy %.2f%%", 100.0 * result.val_accuracy);
  if (!cfg_.quiet) std::printf("%s\n", memory_summary(memory).c_str());
  if (!cfg_.quiet && nothing_left)
    std::printf("done: nothing left to train, the run was already at sample %lld of %lld\n",
                (long long)total_samples_, (long long)total_samples_);
  else if (!cfg_.quiet)
    std::printf("done: %lld step(s) of %lld samples, %.1f samples/s, %lld center updates (mean staleness %.2f, "
                "read or push median %.1f ms, slowest %.1f ms), final train loss %.4f%s\n",
                (long long)result.steps, (long long)cfg_.step_batch(), result.samples_per_second,
                (long long)staleness[1], staleness[1] > 0 ? staleness[0] / staleness[1] : 0.0, 1e3 * op_times[0],
                1e3 * op_times[1], result.final_loss, val);
  std::fflush(stdout);
}

}  // namespace hetrain::train
