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

// Every value a trade receives or publishes is finite (docs/architecture.md, "Failures"), or the job stops
// here naming the rank, the trade, the parameter and the likely cause.
void CenterTrade::check_finite(const nn::ParamBuffer& params, const float* values, const dist::ElasticCenter& center,
                               int world_rank, const char* what) const {
  const std::string bad = nn::describe_nonfinite(params.specs(), values);
  if (bad.empty()) return;
  HT_THROW("rank ", world_rank, ", center trade ", traffic_.pushes + 1, ": ", what, bad,
           center.wire() == dist::Wire::FP16
               ? " (on --reduce-precision fp16 every value beyond FP16's range of ±65504 is Inf: use "
                 "--reduce-precision bf16, which keeps float's range)"
               : " (the training diverged: lower --lr, add --warmup-epochs, or check the data)");
}

double CenterTrade::trade(nn::ParamBuffer& params, bool on_gpu, const ElasticGroup& group,
                          dist::ElasticCenter& center, dist::SampleCounter& counter,
                          dist::SampleCounter::RankStats& stats, bool& unpushed, int world_rank,
                          int64_t local_step) {
  auto start = Clock::now();
  if (group.leads()) {
    Tensor local = on_gpu ? params.values().to(Device::CPU) : params.values();
    center_values_.resize(size_t(params.count()));
    delta_.resize(size_t(params.count()));
    const int64_t seen = counter.updates();
    const auto read_start = Clock::now();
    center.read_for_trade(center_values_.data());
    traffic_.add(seconds_since(read_start));
    check_finite(params, center_values_.data(), center, world_rank, "the center it read holds ");
    elastic_difference(local.data(), center_values_.data(), delta_.data(), params.count(), alpha_);
    // Non-finite local weights (a finite gradient can still overflow them) make a non-finite difference.
    check_finite(params, delta_.data(), center, world_rank, "its difference to the center holds ");
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
    std::vector<double> none = {0.0};
    group.arrival()->arrive(local_step, none, "the group's center trade");
    // Waiting members keep serving their shards of the center (another group's push may need them) and
    // send signs of life, so that one which falls silent in the broadcast is named.
    MPI_Request bcast;
    HT_MPI_CHECK(MPI_Ibcast(host.data(), int(params.count()), MPI_FLOAT, 0, group.comm(), &bcast));
    group.arrival()->wait(&bcast, 1);
    group.arrival()->step_done();
    if (on_gpu) params.values().copy_from(host);
  }
  return seconds_since(start);
}

}  // namespace hetrain::train
