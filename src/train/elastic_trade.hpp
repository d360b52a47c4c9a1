// The elastic trade of the asynchronous modes (docs/architecture.md, "Training modes"): every tau local
// steps a group's leader reads the center W_c, computes delta = alpha (W - W_c), sets W -= delta and adds
// delta into the center; the group then takes the leader's weights.
#pragma once

#include <cstdint>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/nn.hpp"
#include "train/elastic_group.hpp"

namespace hetrain::train {

// The local side of a trade: delta[i] = alpha (w[i] - center[i]), w[i] -= delta[i].
void elastic_difference(float* w, const float* center, float* delta, int64_t n, float alpha);

// One rank's trades with the center, for the run's last lines.
struct CenterTraffic {
  double staleness_sum = 0;  // center updates by other groups between a trade's read and its push, summed
  int64_t pushes = 0;
  double slowest_op = 0;     // seconds: the longest center read or push
  // This rank's newest center reads and pushes (at most kRecentOps: a long run's memory stays bounded).
  static constexpr size_t kRecentOps = 1024;
  std::vector<double> recent_ops;
  int64_t ops = 0;
  // The median of recent_ops (0 without any): a typical operation, which one descheduled target (a busy
  // machine) or one target in its first step (one-off set-up) does not move.
  double median_op() const;
  void add(double seconds);  // one read or push
};

class CenterTrade {
 public:
  explicit CenterTrade(float alpha) : alpha_(alpha) {}
  // On every member of `group`: the leader trades (counting the push and its staleness in `stats`, and
  // marking its claims pushed in the counter when `unpushed`), then every member takes the leader's
  // weights. The members wait for the leader at a bounded meeting of the group's (a leader stopped in
  // its trade is named "at the group's center trade"; `local_step` numbers it). Returns the seconds it took.
  double trade(nn::ParamBuffer& params, bool on_gpu, const ElasticGroup& group, dist::ElasticCenter& center,
               dist::SampleCounter& counter, dist::SampleCounter::RankStats& stats, bool& unpushed, int world_rank,
               int64_t local_step);
  const CenterTraffic& traffic() const { return traffic_; }

 private:
  void check_finite(const nn::ParamBuffer& params, const float* values, const dist::ElasticCenter& center,
                    int world_rank, const char* what) const;
  float alpha_;
  std::vector<float> center_values_, delta_;
  CenterTraffic traffic_;
};

}  // namespace hetrain::train
