#include "train/elastic_trade.hpp"

#include <mpi.h>

#include <algorithm>

#include "hetrain/error.hpp"
#include "train/shared_step.hpp"

namespace hetrain::train {

void elastic_difference(float* w, const float* center, float* delta, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) {
    delta[i] = alpha * (w[i] - center[i]);
    w[i] -= delta[i];
  }
}

void CenterTraffic::add(double seconds) {
  slowest_op = std::max(slowest_op, seconds);
  if (recent_ops.size() < kRecentOps)
    recent_ops.push_back(seconds);
  else
    recent_ops[size_t(ops % int64_t(kRecentOps))] = seconds;
  ++ops;
}

double CenterTraffic::median_op() const {
  if (recent_ops.empty()) return 0;
  std::vector<double> sorted = recent_ops;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2];
}

double CenterTrade::trade(nn::ParamBuffer& params, bool on_gpu, const ElasticGroup& group,
                          dist::ElasticCenter& center, dist::SampleCounter& counter,
                          dist::SampleCounter::RankStats& stats, bool& unpushed, int world_rank) {
  auto start = Clock::now();
  if (group.leads()) {
    Tensor local = on_gpu ? params.values().to(Device::CPU) : params.values();
    center_values_.resize(size_t(params.count()));
    delta_.resize(size_t(params.count()));
    const int64_t seen = counter.updates();
    const auto read_start = Clock::now();
    center.read_for_trade(center_values_.data());
    traffic_.add(seconds_since(read_start));
    elastic_difference(local.data(), center_values_.data(), delta_.data(), params.count(), alpha_);
    const auto add_start = Clock::now();
    center.push(delta_.data());
    traffic_.add(seconds_since(add_start));
    // Staleness: the center updates by other groups between this read and this push.
    const int64_t staleness = counter.count_update() - seen;
    traffic_.staleness_sum += double(staleness);
    ++traffic_.pushes;
    stats.pushes += 1;
    stats.staleness += staleness;
    if (unpushed) counter.pushed(world_rank), unpushed = false;  // every claim so far is in the center
    if (on_gpu) params.values().copy_from(local);
  }
  if (group.size() > 1) {
    Tensor host = on_gpu ? params.values().to(Device::CPU) : params.values();
    // Waiting members keep serving their shards of the center: another group's push may need them.
    MPI_Request bcast;
    HT_MPI_CHECK(MPI_Ibcast(host.data(), int(params.count()), MPI_FLOAT, 0, group.comm(), &bcast));
    dist::wait_serving(&bcast);
    if (on_gpu) params.values().copy_from(host);
  }
  return seconds_since(start);
}

}  // namespace hetrain::train
