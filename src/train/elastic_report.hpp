// What rank 0 prints and writes in the asynchronous modes: the announcement, the progress and metrics
// lines over a window of its local steps (every rank's figures from its row in the shared counter, so no
// rank waits for the report), and the last lines of the run. docs/report.md has the metrics line.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/train.hpp"
#include "train/elastic_group.hpp"
#include "train/elastic_trade.hpp"
#include "train/outputs.hpp"
#include "train/report.hpp"
#include "train/setup.hpp"

namespace hetrain::train {

class ElasticReport {
 public:
  ElasticReport(const TrainConfig& cfg, const Setup& s, const dist::World& world, const ElasticGroup& group,
                int64_t total_samples)
      : cfg_(cfg), s_(s), world_(world), group_(group), total_samples_(total_samples) {}

  // Collective (the rank table); rank 0 prints the notes and, unless --quiet, what the run will do.
  // `batches`: every rank's local batch.
  void announce(const std::vector<int64_t>& batches) const;
  // The first window begins at sample `position`, with every rank's counter row as `stats`.
  void start(int64_t position, std::vector<dist::SampleCounter::RankStats> stats);
  // This rank's local step: its loss, correct count, samples and learning rate; its seconds.
  void add_step(double loss_sum, double correct, int64_t samples, float lr);
  void add_compute(double s) { compute_ += s; }
  void add_wait(double s) { wait_ += s; }
  void add_comm(double s) { comm_ += s; }
  // Rank 0: the newest validation of the center, for the next metrics line.
  void validated(double loss, double accuracy) { val_loss_ = loss, val_accuracy_ = accuracy; }
  // Rank 0, after each of its local steps: every --log-every of them the progress line (unless --quiet) and
  // the metrics line (--metrics) over the window; `position`: the end of the claim just trained.
  void report(int64_t position, int64_t local_steps, dist::SampleCounter& counter, Outputs& outputs);
  // This rank's last window: the reported one, or the steps since when it holds any.
  double final_loss() const { return count_ > 0 ? loss_sum_ / count_ : last_loss_; }

  // Collective: rank 0 prints the run's last lines. `traffic`: this rank's, summed over the ranks (the
  // median and the slowest operation: the highest rank's).
  void summary(const TrainResult& result, bool stopped, bool nothing_left, int64_t samples_done,
               const CenterTraffic& traffic, bool checkpoints) const;

 private:
  std::string wire_text() const;
  ElasticRecord window_record(int64_t position, double seconds, const std::vector<dist::SampleCounter::RankStats>& stats,
                              std::vector<double>& group_samples, double& pushes, double& staleness);
  void print_line(int64_t position, double seconds, const ElasticRecord& rec, const std::vector<double>& group_samples,
                  double pushes, double staleness) const;

  using Clock = std::chrono::steady_clock;
  const TrainConfig& cfg_;
  const Setup& s_;
  const dist::World& world_;
  const ElasticGroup& group_;
  int64_t total_samples_;
  double loss_sum_ = 0, correct_ = 0, count_ = 0, last_loss_ = 0;  // the window; the last reported loss
  double compute_ = 0, wait_ = 0, comm_ = 0;
  float lr_ = 0;
  double val_loss_ = -1, val_accuracy_ = -1;  // rank 0: the newest validation since the last line; -1: none
  Clock::time_point time_;                    // rank 0: of the last line (or the start)
  int64_t position_ = 0;                      // ... and the position then
  std::vector<dist::SampleCounter::RankStats> stats_;  // rank 0: every rank's row then
};

}  // namespace hetrain::train
