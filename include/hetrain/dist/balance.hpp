// hetrain/dist/balance.hpp — load balancing without MPI: cost model, split solver, decisions.
//
// docs/architecture.md, "Load balancing". Rank r's compute time per step is modelled as t_r(b) = α_r + β_r·b for
// b ≥ 1 and t_r(0) = 0 (a rank with no samples does no forward/backward). The solver picks the integer
// split b (Σ b = B, 0 ≤ b_r ≤ cap_r) that minimises max_r t_r(b_r). BalancePlanner decides WHEN to
// change the split (calibration schedule, every K steps, hysteresis) from models that every rank holds
// identically; the MPI Balancer (balancer.hpp) only adds the allgather. Everything here is deterministic.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace hetrain::dist {

// ---------------------------------------------------------------- cost model
struct CostModel {
  double alpha = 0.0;  // seconds per step, fixed part (≥ 0)
  double beta = 0.0;   // seconds per sample (≥ 0; 0 = unknown/free)
  // How far to trust it (CostWindow::fit fills these; 0 = not measured): the relative spread of single
  // steps around the fit (RMS of t/predict − 1) and the effective number of steps behind it
  // ((Σw)²/Σw² of the weights used). The planner's noise bound comes from them.
  double spread = 0.0;
  double steps = 0.0;
  double predict(int64_t b) const { return b <= 0 ? 0.0 : alpha + beta * double(b); }
  // Relative standard error of the fitted level: spread / √steps (kUnknownSpread when never measured).
  double level_error() const;
  static constexpr double kUnknownSpread = 0.1;
};

struct CostSample {
  int64_t b;
  double seconds;
};

// Weighted least squares of seconds on b; samples[i] has weight weights[i]. Samples with b = 0 carry no
// information and are ignored. Never returns negative α or β:
//  - one distinct b only (the steady state of a balanced run): keep `previous`'s shape and refit its level,
//    t = s·(α_p + β_p·b); without a usable previous model assume α = 0 (t proportional to b);
//  - fitted β < 0 (noise): fall back as above; fitted α < 0: α = 0 and β through the origin.
// Returns {0, 0} when there is nothing to fit (no sample with b > 0) and no previous model.
CostModel fit_cost_model(const std::vector<CostSample>& samples, const std::vector<double>& weights,
                         const CostModel* previous);

// The last `capacity` samples of one rank, newest weighted most (weight decay^age, age 0 = newest).
class CostWindow {
 public:
  explicit CostWindow(int capacity = 40, double decay = 0.9);
  void add(int64_t b, double seconds);
  void clear() { samples_.clear(); }
  // Forgets all but the newest n samples (a regime change: the older ones describe a machine that is gone).
  void keep_newest(size_t n) {
    while (samples_.size() > n) samples_.pop_front();
  }
  int64_t size() const { return int64_t(samples_.size()); }
  // Weighted least squares over the window; after a regime change (at least kMinShiftRun newest samples
  // all off `previous` by more than kShiftRatio, in one direction) over the new regime's samples only.
  // Outliers (a minority of steps off the first fit by more than kOutlierRatio) are left out of the fit.
  // Fills spread and steps from the samples used (spread: previous's when fewer than 3 were used).
  CostModel fit(const CostModel* previous) const;
  // The newest `run` samples all miss `model` by more than `ratio` in the same direction.
  bool newest_off(const CostModel& model, size_t run, double ratio) const;
  // How many of the newest samples say a straggler began or ended, for the balancer's early refit: 2 when
  // the newest two both miss `model` by more than 2× the same way, kSustainedRun when that many miss it by
  // more than kShiftRatio the same way (throttling, another job), else 0. One step is no evidence: one-step
  // bursts (another job's spike, a page-cache miss) reach 3× and more on shared machines, and refitting on
  // them moved the plan away and back at every burst (bench_balance_sim, scenario bursts).
  size_t steps_off(const CostModel& model) const;
  // The newest sample's seconds over what `model` predicts for it (1 when there is none).
  double newest_ratio(const CostModel& model) const;
  static constexpr double kShiftRatio = 1.5;
  static constexpr double kOutlierRatio = 1.5;  // fit(): a minority of steps this far off the fit are dropped
  static constexpr size_t kMinShiftRun = 5;
  static constexpr size_t kSustainedRun = 4;

 private:
  int capacity_;
  double decay_;
  std::deque<CostSample> samples_;  // oldest first
};

// ---------------------------------------------------------------- one rank's side
// What each rank's balancer does without MPI: record its steps, vote for an early refit when its newest
// steps leave its model, and fit the model it sends to the others at a refit. The MPI Balancer
// (balancer.hpp) and the balance simulator (bench/balance_sim_bench.cpp) both drive this same code.
struct BalanceConfig;
class BalancePlanner;
class RankBalance {
 public:
  explicit RankBalance(const BalanceConfig& config);
  // A step's local batch and compute seconds (no waiting, no communication; set-up steps left out).
  void record(int64_t b, double seconds);
  // After `step`: ±2 when the newest steps are far slower (+) or faster (−) than the model (a straggler
  // began or ended; CostWindow::steps_off says what "far" is), ±1 when only the newest step is off by more
  // than kLeanRatio, else 0; 0 also before the first fit and within kCooldown steps of the last early refit.
  int vote(const BalancePlanner& planner, int64_t step) const;
  // The model to send at a refit after `step`. `early`: an agreed early refit; a rank whose own newest
  // steps left its model then fits them alone (the old regime's steps describe a machine that is gone).
  CostModel refit(int64_t step, bool early);
  static constexpr int64_t kCooldown = 4;
  static constexpr double kLeanRatio = 1.5;

 private:
  CostWindow window_;
  CostModel mine_;
  bool have_mine_ = false;
  int64_t last_early_ = -1000000;
};

// One step's votes, summed over the ranks (the trainer carries the four counts in its step agreement).
struct RefitVotes {
  int64_t slower = 0, faster = 0;                  // votes +2 / −2
  int64_t leaning_slower = 0, leaning_faster = 0;  // votes > 0 / < 0 (the above included)
  void add(int vote);
  // The four counts as sums of a StepArrival meeting (exact in doubles): appended, and read back from the
  // summed values at `at`.
  void append_to(std::vector<double>& values) const;
  static RefitVotes read(const std::vector<double>& values, size_t at);
};
// Refit early when some rank's speed changed relative to the others: a rank voted ±2 and not every rank
// leans the same way. When they all do, it is a common slowdown (contention, another job on every node, a
// shared file system) or speed-up, which changes no relative speed and calls for no new split.
bool early_refit_agreed(const RefitVotes& votes, int n);

// ---------------------------------------------------------------- solver
// Minimise max_r models[r].predict(b_r) s.t. Σ b_r = B, 0 ≤ b_r ≤ caps[r] (caps empty = no caps).
// Water filling by bisection on T over continuous b, rounding by largest remainder, then a greedy fix-up
// that moves one sample at a time off the slowest rank while that lowers (max time, ranks at max); the
// result is an optimum of the integer problem. Deterministic; ties go to the lower rank.
// Throws hetrain::Error when Σ caps < B, B < 0, models is empty or caps has the wrong length.
std::vector<int64_t> solve_split(const std::vector<CostModel>& models, const std::vector<int64_t>& caps, int64_t B);

// Every share 0 or at least `min_share`, the sum kept: batch norm cannot normalize a single sample whose
// feature maps are 1x1 (one value per channel), so models with batch norm never give a rank one sample.
// A smaller share is raised to min_share from the largest share while that one keeps min_share, else
// given to it. Deterministic, so every rank gets the same split.
std::vector<int64_t> respect_min_share(std::vector<int64_t> split, int64_t min_share);

// max_r models[r].predict(split[r]).
double predicted_step_seconds(const std::vector<CostModel>& models, const std::vector<int64_t>& split);

// The one rounding rule of every split (the solver's fills, the planner's part-way splits, a short step's
// scaled split): each share is floor(exact[r]) (at most caps[r]), and the samples still missing to `total`
// go one each to the ranks with the largest fractional parts, ties to the lower rank, none past its cap,
// round after round while some rank has room. So Σ = total unless the caps hold less, every share is
// within 1 of its exact value when Σ exact = total, and the same on every rank. caps empty = no caps.
std::vector<int64_t> round_largest_remainder(const std::vector<double>& exact, int64_t total,
                                             const std::vector<int64_t>& caps = {});

// B/n per rank with the remainder to the first ranks (cap-aware: if caps bind, the nearest even split).
std::vector<int64_t> uniform_split(int n, int64_t B, const std::vector<int64_t>& caps);

// ---------------------------------------------------------------- decisions
enum class BalanceMode { None, Static, Dynamic };
BalanceMode parse_balance_mode(const std::string& text);  // "none" | "static" | "dynamic"; else throws
const char* balance_mode_name(BalanceMode mode);

struct BalanceConfig {
  BalanceMode mode = BalanceMode::Dynamic;
  int64_t rebalance_every = 20;   // K: dynamic refits at every K-th step after calibration
  int64_t calibration_steps = 3;  // steps at the uniform split, then as many at a perturbed split
  int window = 0;                 // samples per rank in the fit; 0 = 2·K (spans the last two plans)
  double decay = 0.9;             // weight of a sample one step older (recent measurements count more)
  double hysteresis = 0.03;       // floor of the noise bound: a new plan must predict a larger relative gain
  std::vector<int64_t> caps;      // --max-local-batch: empty = none, one value for all, or one per rank
  // Every share is a multiple of it: ghost batch norm's group size (docs/architecture.md, "Batch norm")
  // normalizes fixed groups of this many consecutive samples of the global batch, so no group may straddle
  // two ranks. 1 = any share.
  int64_t granularity = 1;
};

// Validates the configuration for n ranks and global batch B (before any collective) and returns the
// per-rank caps (INT64_MAX where there is none). Errors name the option: "--max-local-batch: ...".
std::vector<int64_t> resolve_caps(const BalanceConfig& config, int n, int64_t B);

// ---------------------------------------------------------------- GPU memory caps
// The largest local batch whose activations fit in a GPU's free memory: (free − reserve) / bytes per
// sample, 0 when not even one sample fits. The reserve keeps room for what is allocated later (the
// optimizer's momentum buffer, cuDNN workspaces for new shapes, fragmentation).
int64_t memory_batch_cap(int64_t free_bytes, int64_t reserve_bytes, int64_t bytes_per_sample);
// Per rank, the smaller of the user's cap (resolve_caps) and the memory cap (negative: none, e.g. a CPU rank).
std::vector<int64_t> merge_caps(const std::vector<int64_t>& user_caps, const std::vector<int64_t>& memory_caps);

// Deterministic balancing state machine, identical on every rank. Step s is the s-th training step
// (0-based); advance(s, ...) is called after step s and decides the split of step s + 1.
//   steps [0, C)      uniform split (calibration, phase 1)
//   steps [C, 2C)     perturbed split: every rank gets a second batch size (Σ still B) for slope+intercept
//   after step 2C-1   first fitted split (static stops here; none never leaves uniform)
//   dynamic           refit after steps 2C-1 + j·K, j ≥ 1, and early when the ranks agree on it
// At a refit (docs/architecture.md, "Load balancing"):
//   - never thrash: the solved split is adopted only when its predicted gain beats the noise bound,
//     max(hysteresis, z_n · the largest level_error() of the ranks involved), z_n = √(2 ln n) + 1 (the
//     largest of n fitting errors grows like √(2 ln n)); a gain under twice the bound moves half-way (at
//     the first fit also one between the hysteresis and the bound);
//   - never starve: a rank left at b = 0 whose one unit (below) costs no more than the step gets a probe
//     share of one unit and so is measured at every step; a rank whose one unit alone costs more stays idle,
//     with the reason in describe(), and gets a probe share of one unit after 2, then 4, 8, ... 32 refits idle.
// Granularity G (BalanceConfig::granularity, 1 by default): every share is a multiple of G. The planner
// works in units of G samples throughout (caps floor(cap/G), global batch B/G, models costing β·G per unit)
// and translates only at its boundary: split(), global_batch() and set_split() are in samples, advance()
// takes and models() returns models per sample, speeds() are samples/s. Calibration, the solver, half-way
// moves, hysteresis and probes thus work unchanged on units; with G = 1 a unit is a sample.
class BalancePlanner {
 public:
  BalancePlanner(int n, int64_t B, const BalanceConfig& config);

  const std::vector<int64_t>& split() const { return split_; }  // samples per rank
  int size() const { return n_; }
  int64_t global_batch() const { return units_ * G_; }  // samples
  int64_t granularity() const { return G_; }
  const BalanceConfig& config() const { return config_; }
  // True when advance(step) needs every rank's fitted model (the MPI Balancer allgathers only then).
  bool needs_models(int64_t step) const;
  // Dynamic mode after the first fit: a refit may also come between the scheduled ones, when a rank's
  // newest steps miss its model (agreed by all ranks; see Balancer::off_model).
  bool may_refit_early(int64_t step) const;
  // Called after `step` on every rank with the same models (empty when !needs_models(step)).
  // Returns true when split() changed.
  // `early`: an agreed refit outside the schedule (then models are given, as for a scheduled one).
  bool advance(int64_t step, const std::vector<CostModel>& models, bool early = false);
  // Replaces the split (checkpoint resume with the same world size; the MPI Balancer's agreement step).
  // Throws unless Σ = B, 0 ≤ b_r ≤ cap_r, every b_r is a multiple of the granularity and the length is n.
  void set_split(const std::vector<int64_t>& split);

  // For logs and checkpoints (valid after the first fit): fitted models (per sample, as advance() got
  // them), samples/s of each rank at its current b, predicted step time of the current plan and of the
  // uniform plan under the same models.
  const std::vector<CostModel>& models() const { return models_; }
  std::vector<double> speeds() const;
  double predicted_seconds() const;
  double predicted_uniform_seconds() const;
  int64_t fits() const { return fits_; }              // refits done so far
  int64_t rebalances() const { return rebalances_; }  // split changes so far (calibration included)
  int64_t probes() const { return probes_; }          // probe shares (one unit each) handed to idle ranks so far
  // The noise bound of the last refit (relative gain a new split had to beat) and its decision in words.
  double noise_bound() const { return noise_bound_; }
  const std::string& decision() const { return decision_; }
  // "step 42: split [40, 41, 20, 10] speeds [..] samples/s, predicted 12.3 ms/step (uniform 25.0 ms, 2.03x)"
  // + the decision and why any rank is idle.
  std::string describe(int64_t step) const;

 private:
  // Everything below works in units of G samples, except split_ and models_ (the boundary, in samples).
  void adopt(const std::vector<int64_t>& reference, const std::vector<int64_t>& candidate, bool first);
  void give_probes();
  void publish();  // split_ = unit_split_ in samples; after every change of unit_split_
  std::string one_unit() const;  // "1 sample", "4 samples"
  int n_;
  int64_t G_, units_;  // granularity; global batch in units (B / G)
  BalanceConfig config_;
  std::vector<int64_t> unit_caps_, unit_uniform_, unit_perturbed_, unit_split_;
  std::vector<CostModel> unit_models_;  // cost per unit: β·G
  std::vector<int64_t> split_;          // unit_split_ in samples (what split() returns)
  std::vector<CostModel> models_;       // the models advance() got, made usable, per sample (models())
  std::vector<int> idle_fits_;   // refits in a row that each rank spent at b = 0
  std::vector<int> probe_wait_;  // refits an idle rank waits before its next probe (2, 4, ... 32)
  static constexpr int kMaxProbeWait = 32;
  int64_t fits_ = 0, rebalances_ = 0, probes_ = 0;
  double noise_bound_ = 0.0;
  std::string decision_, idle_notes_;
};

}  // namespace hetrain::dist
