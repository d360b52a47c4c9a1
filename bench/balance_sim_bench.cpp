// bench/balance_sim_bench.cpp — the balancer at scale: hundreds to thousands of virtual ranks driven
// through the real balancing code, against an oracle that knows the true speeds.
//
// Real code, nothing re-implemented: every virtual rank has its own dist::RankBalance (cost window, fit,
// early-refit vote), the votes go through dist::early_refit_agreed, the models through one
// dist::BalancePlanner (noise bound, half-way moves, probes) and dist::solve_split — exactly what each rank
// of a real job runs after its allgather. What is modelled is only the cluster (docs/balance-sim.md):
//   - GPU kinds per node (8 ranks a node, kinds in turn): V100 : A100 : H100 ≈ 1 : 2.5 : 5 on ResNet-50
//     (600 / 1500 / 3000 samples/s, fixed costs 6 / 4 / 3 ms a step, memory caps 96 / 256 / 512 samples);
//   - noise: Gaussian jitter, heavy-tailed one-step bursts, throttling regimes (a rank at 0.625 of its
//     speed for 300–800 steps), transient 4× stragglers (20 steps), node contention (a rank's time grows
//     with its node's total batch, and another job slows a whole node for a while);
//   - the gradient allreduce of ResNet-50 (102 MB) over a given bandwidth, the same for every plan.
// The oracle's split is solved from the true (noise-free) models of the moment, its contention fixed point
// included; both it and the balancer's split are timed with the same noise draws, so the fraction of the
// oracle rate measures what the balancer loses, not what noise costs everyone.
//
//   bench_balance_sim [--ranks 8,64,512,4096] [--scenarios all|NAME,...] [--steps S] [--csv FILE]
//                     [--bandwidth-gbit G] [--seed N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "hetrain/dist/balance.hpp"
#include "hetrain/error.hpp"

namespace {

using namespace hetrain::dist;
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Kind {
  const char* name;
  double samples_per_s, fixed_s;
  int64_t cap;
};
constexpr Kind kKinds[3] = {{"V100", 600, 0.006, 96}, {"A100", 1500, 0.004, 256}, {"H100", 3000, 0.003, 512}};
constexpr int kRanksPerNode = 8;
constexpr double kGradientBytes = 25.56e6 * 4;  // ResNet-50's gradients in FP32
constexpr double kLatency = 5e-6;                // one message, seconds

struct Scenario {
  const char* name;
  const char* what;
  double jitter = 0;          // relative σ of every step's time
  double burst_prob = 0;      // per rank and step: a one-step burst of 1.5× to 20× (Pareto tail)
  double throttle_prob = 0;   // per rank and step: throttling starts (speed × 0.625 for 300–800 steps)
  double straggle_prob = 0;   // per rank and step: a 4× straggler starts (20 steps)
  double coupling = 0;        // a rank's time × (1 + coupling · node batch / node's fair batch)
  double other_job_prob = 0;  // per node and step: another job slows the whole node 1.5× for 200–600 steps
};

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = {
      {"steady", "2% jitter", 0.02},
      {"jitter5", "5% Gaussian jitter", 0.05},
      {"jitter10", "10% Gaussian jitter", 0.10},
      {"bursts", "5% jitter + one-step bursts (1% of steps, 1.5-20x)", 0.05, 0.01},
      {"throttle", "3% jitter + throttling regimes (0.625x for 300-800 steps)", 0.03, 0, 1.0 / 3000},
      {"stragglers", "3% jitter + transient 4x stragglers (20 steps)", 0.03, 0, 0, 1.0 / 5000},
      {"contention", "5% jitter + node coupling 0.3 + other jobs on nodes (1.5x)", 0.05, 0, 0, 0, 0.3, 1.0 / 4000},
  };
  return all;
}

// The virtual cluster: each rank's true model of the moment and its step time for a split.
class Cluster {
 public:
  Cluster(int n, int64_t B, const Scenario& sc, uint64_t seed) : n_(n), B_(B), sc_(sc), rng_(seed) {
    nodes_ = (n + kRanksPerNode - 1) / kRanksPerNode;
    throttle_until_.assign(size_t(n), -1), straggle_until_.assign(size_t(n), -1);
    other_job_until_.assign(size_t(nodes_), -1);
    for (int r = 0; r < n; ++r) caps_.push_back(kind(r).cap);
  }
  const Kind& kind(int r) const { return kKinds[(r / kRanksPerNode) % 3]; }
  const std::vector<int64_t>& caps() const { return caps_; }

  // Regimes that start or end at `step` (throttling, stragglers, other jobs); true when any changed.
  bool advance_regimes(int64_t step) {
    bool changed = false;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int r = 0; r < n_; ++r) {
      if (sc_.throttle_prob > 0 && throttle_until_[r] < step && u(rng_) < sc_.throttle_prob)
        throttle_until_[r] = step + 300 + int64_t(500 * u(rng_)), changed = true;
      if (sc_.straggle_prob > 0 && straggle_until_[r] < step && u(rng_) < sc_.straggle_prob)
        straggle_until_[r] = step + 20, changed = true;
      changed = changed || throttle_until_[r] == step || straggle_until_[r] == step;
    }
    for (int j = 0; j < nodes_; ++j) {
      if (sc_.other_job_prob > 0 && other_job_until_[j] < step && u(rng_) < sc_.other_job_prob)
        other_job_until_[j] = step + 200 + int64_t(400 * u(rng_)), changed = true;
      changed = changed || other_job_until_[j] == step;
    }
    return changed;
  }

  // Rank r's true model now, without contention and noise.
  CostModel truth(int r, int64_t step) const {
    double slow = 1.0;
    if (throttle_until_[r] >= step) slow *= 1.6;
    if (straggle_until_[r] >= step) slow *= 4.0;
    if (other_job_until_[r / kRanksPerNode] >= step) slow *= 1.5;
    const Kind& k = kind(r);
    return {k.fixed_s * slow, slow / k.samples_per_s};
  }

  // The contention factor of every rank under `split` (1 without coupling).
  std::vector<double> contention(const std::vector<int64_t>& split) const {
    std::vector<double> f(size_t(n_), 1.0);
    if (sc_.coupling <= 0) return f;
    const double fair = double(B_) / double(n_) * kRanksPerNode;
    for (int j = 0; j < nodes_; ++j) {
      int64_t load = 0;
      for (int r = j * kRanksPerNode; r < std::min(n_, (j + 1) * kRanksPerNode); ++r) load += split[r];
      for (int r = j * kRanksPerNode; r < std::min(n_, (j + 1) * kRanksPerNode); ++r)
        f[r] = 1.0 + sc_.coupling * double(load) / fair;
    }
    return f;
  }

  // This step's noise factor of every rank (jitter × burst), drawn once and applied to every plan.
  std::vector<double> draw_noise() {
    std::vector<double> f(size_t(n_), 1.0);
    std::normal_distribution<double> jitter(0.0, sc_.jitter);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (int r = 0; r < n_; ++r) {
      if (sc_.jitter > 0) f[r] = std::max(0.2, 1.0 + jitter(rng_));
      if (sc_.burst_prob > 0 && u(rng_) < sc_.burst_prob)
        f[r] *= std::min(20.0, 1.0 + 0.5 * std::pow(std::max(1e-9, u(rng_)), -1.0 / 1.5));
    }
    return f;
  }

  // Compute seconds of every rank under `split` at `step` with the given noise.
  std::vector<double> times(const std::vector<int64_t>& split, int64_t step, const std::vector<double>& noise) const {
    const std::vector<double> c = contention(split);
    std::vector<double> t(static_cast<size_t>(n_));
    for (int r = 0; r < n_; ++r) t[r] = truth(r, step).predict(split[r]) * c[r] * noise[r];
    return t;
  }

  // The oracle's split: solved from the true models, iterated to the contention's fixed point.
  std::vector<int64_t> oracle(int64_t step, std::vector<int64_t> start) const {
    std::vector<CostModel> m(static_cast<size_t>(n_));
    for (int it = 0; it < (sc_.coupling > 0 ? 6 : 1); ++it) {
      const std::vector<double> c = contention(start);
      for (int r = 0; r < n_; ++r) {
        const CostModel t = truth(r, step);
        m[r] = {t.alpha * c[r], t.beta * c[r]};
      }
      std::vector<int64_t> next = solve_split(m, caps_, B_);
      if (next == start) break;
      start = std::move(next);
    }
    return start;
  }

 private:
  int n_, nodes_;
  int64_t B_;
  Scenario sc_;
  std::mt19937_64 rng_;
  std::vector<int64_t> caps_, throttle_until_, straggle_until_, other_job_until_;
};

struct Result {
  double oracle_fraction = 0, rebalances_per_1000 = 0, probes = 0, solve_ms_mean = 0,
         solve_ms_max = 0, allgather_ms = 0;
};

Result simulate(int n, const Scenario& sc, int64_t steps, double bandwidth, uint64_t seed) {
  const int64_t B = 64 * int64_t(n);
  BalanceConfig config;  // the defaults of `hetrain train --balance dynamic`
  Cluster cluster(n, B, sc, seed);
  config.caps = cluster.caps();
  BalancePlanner planner(n, B, config);
  std::vector<RankBalance> ranks(static_cast<size_t>(n), RankBalance(config));
  const double comm = 2.0 * (n - 1) / n * kGradientBytes / bandwidth + 2 * std::ceil(std::log2(std::max(2, n))) * kLatency;
  const double allgather = std::ceil(std::log2(std::max(2, n))) * kLatency + n * 32.0 / bandwidth;
  const int64_t settled = 2 * config.calibration_steps;
  std::vector<int64_t> best = uniform_split(n, B, config.caps);
  Result res;
  double t_ours = 0, t_oracle = 0, solve_sum = 0;
  int64_t refits = 0, changes = 0;
  for (int64_t step = 0; step < steps; ++step) {
    if (cluster.advance_regimes(step) || step % config.rebalance_every == 0) best = cluster.oracle(step, best);
    const std::vector<double> noise = cluster.draw_noise();
    const std::vector<int64_t> split = planner.split();
    const std::vector<double> t = cluster.times(split, step, noise), to = cluster.times(best, step, noise);
    if (step >= settled) {
      t_ours += *std::max_element(t.begin(), t.end()) + comm;
      t_oracle += *std::max_element(to.begin(), to.end()) + comm;
    }
    RefitVotes votes;
    for (int r = 0; r < n; ++r) {
      ranks[r].record(split[r], t[r]);
      votes.add(ranks[r].vote(planner, step));
    }
    const bool early = early_refit_agreed(votes, n) && planner.may_refit_early(step) && !planner.needs_models(step);
    std::vector<CostModel> models;
    double fit_s = 0;
    if (planner.needs_models(step) || early) {
      // Every rank fits its own window at the same time; the slowest of those fits is what all wait for.
      models.resize(size_t(n));
      for (int r = 0; r < n; ++r) {
        auto f0 = Clock::now();
        models[r] = ranks[r].refit(step, early);
        fit_s = std::max(fit_s, since(f0));
      }
    }
    auto s0 = Clock::now();
    const bool changed = planner.advance(step, models, early);
    if (!models.empty()) {
      const double solve = since(s0) + fit_s;
      solve_sum += solve, res.solve_ms_max = std::max(res.solve_ms_max, 1e3 * solve), ++refits;
    }
    if (changed && step >= settled) ++changes;
  }
  const int64_t measured = std::max<int64_t>(1, steps - settled);
  res.oracle_fraction = t_ours > 0 ? t_oracle / t_ours : 0;
  res.rebalances_per_1000 = 1000.0 * double(changes) / double(measured);
  res.probes = double(planner.probes());
  res.solve_ms_mean = refits ? 1e3 * solve_sum / double(refits) : 0;
  res.allgather_ms = 1e3 * allgather;
  return res;
}

// The async modes at scale: rank 0's window holds the global sample counter and every rank's row of step
// statistics. Per local step a rank sends it one MPI_Fetch_and_op (the claim) and one MPI_Accumulate (its
// row; 2 more atomics with checkpoints on), and every rank reads all rows 4 times a second for the stall
// watchdog (n rows of 88 bytes). Rank 0 is modelled as one server: a fixed service time per atomic plus
// the read bytes at the link's bandwidth; utilisation and the mean wait of an M/D/1 queue.
void async_counter_table(double service_s, double bandwidth) {
  std::printf("\n== async mode at scale: rank 0 serves the sample counter and the ranks' statistics rows\n");
  std::printf("   per local step 2 atomics (claim + statistics row), each %.1f us at the target; every rank reads\n"
              "   all n rows (88 B each) 4x a second for the stall watchdog, at %.0f Gbit/s; M/D/1 queue.\n",
              1e6 * service_s, bandwidth * 8 / 1e9);
  std::printf("   %-6s %-20s %6s %11s %12s %13s %12s %11s %10s\n", "ranks", "samples/s per GPU", "batch", "steps/s",
              "atomics/s", "watchdog MB/s", "utilisation", "mean wait", "verdict");
  struct Load {
    const char* model;
    double scale;  // × the ResNet-50 rates of the kinds
  };
  for (const Load& load : {Load{"resnet50 600-3000", 1.0}, Load{"resnet18 2.4k-12k", 4.0}}) {
    for (int n : {64, 512, 4096}) {
      for (int batch : {64, 16}) {
        double steps = 0;
        for (int r = 0; r < n; ++r) steps += kKinds[(r / kRanksPerNode) % 3].samples_per_s * load.scale / batch;
        const double atomics = 2 * steps, read_bytes = 4.0 * n * n * 88.0;
        const double rho = atomics * service_s + read_bytes / bandwidth;
        const double mean_service = service_s;
        const double wait = rho < 1 ? rho * mean_service / (2 * (1 - rho)) : INFINITY;
        char w[32];
        if (std::isfinite(wait)) std::snprintf(w, sizeof w, "%.1f us", 1e6 * wait);
        else std::snprintf(w, sizeof w, "unbounded");
        std::printf("   %-6d %-20s %6d %11.0f %12.0f %13.1f %11.1f%% %11s %10s\n", n, load.model, batch, steps, atomics,
                    read_bytes / 1e6, 100 * rho, w, rho < 0.5 ? "fine" : rho < 1 ? "queueing" : "saturated");
      }
    }
  }
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> sizes = {8, 64, 512, 4096};
  std::string which = "all", csv;
  int64_t steps = 0;  // 0: 2000 steps, 1000 at 4096 ranks
  double bandwidth_gbit = 100;
  uint64_t seed = 1;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string key = argv[i];
      HT_CHECK(i + 1 < argc, "bench_balance_sim: option ", key, " needs a value");
      const std::string v = argv[++i];
      if (key == "--ranks") {
        sizes.clear();
        for (const std::string& s : split_list(v)) sizes.push_back(std::atoi(s.c_str()));
      } else if (key == "--scenarios") which = v;
      else if (key == "--steps") steps = std::atoll(v.c_str());
      else if (key == "--csv") csv = v;
      else if (key == "--bandwidth-gbit") bandwidth_gbit = std::atof(v.c_str());
      else if (key == "--seed") seed = uint64_t(std::atoll(v.c_str()));
      else HT_THROW("bench_balance_sim: unknown option ", key, " (see the comment at the top of the source)");
    }
    for (int n : sizes) HT_CHECK(n >= 2, "bench_balance_sim: --ranks must be >= 2, got ", n);
    std::vector<Scenario> chosen;
    for (const Scenario& sc : scenarios())
      if (which == "all" || ("," + which + ",").find("," + std::string(sc.name) + ",") != std::string::npos)
        chosen.push_back(sc);
    HT_CHECK(!chosen.empty(), "bench_balance_sim: no scenario named in --scenarios ", which);
    const double bandwidth = bandwidth_gbit * 1e9 / 8;

    std::ofstream out;
    if (!csv.empty()) {
      out.open(csv);
      HT_CHECK(out.good(), "bench_balance_sim: cannot write ", csv);
      out << "scenario,ranks,oracle_fraction,rebalances_per_1000,probes,solve_ms_mean,solve_ms_max,allgather_ms\n";
    }
    std::printf("== balancer simulator: virtual ranks through the real RankBalance / BalancePlanner / solve_split\n");
    std::printf("   8 ranks a node, V100/A100/H100 nodes in turn (1 : 2.5 : 5, fixed costs 6/4/3 ms, caps 96/256/512),\n"
                "   B = 64 x ranks, refits every 20 steps (+ early), ResNet-50 allreduce at %.0f Gbit/s (not overlapped)\n",
                bandwidth_gbit);
    std::printf("   %-11s %6s %7s %10s %11s %7s %11s %11s %11s\n", "scenario", "ranks", "steps", "of oracle",
                "rebal/1k", "probes", "solve ms", "max ms", "allgather");
    for (const Scenario& sc : chosen) {
      for (int n : sizes) {
        const int64_t s = steps > 0 ? steps : (n >= 4096 ? 1000 : 2000);
        const Result r = simulate(n, sc, s, bandwidth, seed);
        std::printf("   %-11s %6d %7lld %9.1f%% %11.1f %7.0f %11.3f %11.3f %8.3f ms\n", sc.name, n, (long long)s,
                    100 * r.oracle_fraction, r.rebalances_per_1000, r.probes, r.solve_ms_mean, r.solve_ms_max,
                    r.allgather_ms);
        std::fflush(stdout);
        if (out.is_open())
          out << sc.name << ',' << n << ',' << r.oracle_fraction << ',' << r.rebalances_per_1000 << ',' << r.probes << ','
              << r.solve_ms_mean << ',' << r.solve_ms_max << ',' << r.allgather_ms << '\n';
      }
    }
    std::printf("   of oracle = the oracle's time over the balancer's for the same steps and noise draws (after\n"
                "   calibration); rebal/1k = plan changes per 1,000 steps; solve ms = the slowest rank's fit +\n"
                "   the planner's decision, measured here (mean, max); allgather = modelled (log2 n latencies +\n"
                "   n x 32 bytes). Scenarios:\n");
    for (const Scenario& sc : chosen) std::printf("     %-11s %s\n", sc.name, sc.what);
    async_counter_table(2e-6, bandwidth);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
