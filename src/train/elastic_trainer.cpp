// The asynchronous and hybrid training modes (docs/architecture.md, "Training modes"): shared-memory
// elastic averaging SGD over a center model in MPI one-sided memory (dist/elastic.hpp).
//
// Every rank belongs to a group: in async mode a group of one, in hybrid mode the ranks of a node (or of
// --groups). A group trains like a small synchronous job: its leader claims the group's next samples from
// the global counter, each member takes its share (fitted to the members' measured speeds by a balancer on
// the group's communicator, as sync mode's split is, unless --balance none), the members' gradients are
// reduced weighted by their shares, and every member applies the same SGD step. Every tau local steps the leader trades with the
// center: delta = alpha (W_local - W_center), W_local -= delta, W_center += delta; then the group takes the
// leader's weights. Groups never wait for each other. Training ends when the counter has handed out every
// sample of every epoch; the center is then the model: it is evaluated, checkpointed and dumped.
//
// No rank waits for another without a bound (--stall-timeout): the members of a group meet in a
// dist::StepArrival each local step (it names a member that does not come), all ranks meet in one at the
// validation points and at the end, every rank watches every rank's local steps in the shared counter (the
// lowest rank that is not stalled names the stalled ones), and a watchdog thread ends a rank whose own
// step blocks for too long.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/train.hpp"
#include "ops/scale/scale.hpp"
#include "train/checkpointer.hpp"
#include "train/evaluate.hpp"
#include "train/local_step.hpp"
#include "train/outputs.hpp"
#include "train/report.hpp"
#include "train/running_stats.hpp"
#include "train/setup.hpp"
#include "train/shared_step.hpp"
#include "train/shares.hpp"
#include "train/stop_signals.hpp"

namespace hetrain::train {
namespace {

// Ranks within this factor of the fastest of their group share a group under --groups speed (measured
// rates of equal ranks differed by up to 30% with 4 ranks on 2 busy cores).
constexpr double kSpeedGroupWithin = 0.6;

// The wait beyond --stall-timeout before the heartbeat watch names a rank: a group's arrival, which names
// exactly the member that is missing, speaks first (as dist::StepArrival's grace).
double heartbeat_grace(double timeout_s) { return std::max(5.0, 0.1 * timeout_s); }

int64_t micros(double seconds) { return int64_t(std::llround(seconds * 1e6)); }

class ElasticTrainer {
 public:
  explicit ElasticTrainer(const TrainConfig& cfg)
      : cfg_(cfg),
        world_(dist::World::get()),
        s_(make_setup(cfg, world_)),
        outputs_(cfg, world_),
        checkpointer_(cfg, world_, s_.prunable_checkpoints),
        local_step_(s_, cfg.label_smoothing) {
    // This rank's samples per local step: --local-batch, else an equal share of B, within the GPU's memory.
    local_batch_ = cfg.local_batch > 0 ? cfg.local_batch : std::max<int64_t>(1, cfg.global_batch / world_.size());
    if (s_.memory_cap > 0) local_batch_ = std::min(local_batch_, s_.memory_cap);
    group_ = make_group_comm();
    HT_MPI_CHECK(MPI_Comm_rank(group_, &group_rank_));
    HT_MPI_CHECK(MPI_Comm_size(group_, &group_size_));
    if (group_size_ > 1) {  // the members meet once a local step; one that does not come is named
      std::vector<int> names(static_cast<size_t>(group_size_));
      const int me = world_.rank();
      HT_MPI_CHECK(MPI_Allgather(&me, 1, MPI_INT, names.data(), 1, MPI_INT, group_));
      group_arrival_ = std::make_unique<dist::StepArrival>(group_, dist::allgather_strings(group_, world_.host()),
                                                           cfg.stall_timeout, names);
    }
    member_batches_.resize(size_t(group_size_));
    HT_MPI_CHECK(MPI_Allgather(&local_batch_, 1, MPI_INT64_T, member_batches_.data(), 1, MPI_INT64_T, group_));
    group_batch_ = std::accumulate(member_batches_.begin(), member_batches_.end(), int64_t(0));
    if (group_size_ > 1) group_comm_ = dist::make_gradient_communicator(group_, s_.device_kind, false);
    if (group_size_ > 1 && s_.balance_config.mode != dist::BalanceMode::None) make_group_balancer();
    // Every rank learns every rank's group leader (a group is named after its leader's world rank).
    leader_ = group_rank_ == 0 ? world_.rank() : -1;
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &leader_, 1, MPI_INT, MPI_MAX, group_));
    leaders_.resize(size_t(world_.size()));
    HT_MPI_CHECK(MPI_Allgather(&leader_, 1, MPI_INT, leaders_.data(), 1, MPI_INT, world_.comm()));
    const auto& info = s_.train->info();
    total_samples_ = cfg.max_steps > 0 ? std::min(cfg.max_steps * cfg.global_batch, info.num_samples * cfg.epochs)
                                       : info.num_samples * cfg.epochs;
    validate_every_ = cfg.val_every_samples > 0 ? cfg.val_every_samples : info.num_samples;  // default: each epoch
  }

  ~ElasticTrainer() {
    group_arrival_.reset();
    if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
  }

  TrainResult run() {
    announce();
    nn::ParamBuffer& params = s_.model->params();
    const int64_t first_sample = std::min(s_.start_sample, total_samples_);
    Tensor host = params.values().to(Device::CPU);  // the center starts as the (identical) replicas
    // Window creation fails alike everywhere (no usable one-sided component): one line from rank 0.
    std::unique_ptr<dist::ElasticCenter> center_window;
    std::unique_ptr<dist::SampleCounter> counter_window;
    dist::agree_on(world_.comm(), [&] {
      center_window = std::make_unique<dist::ElasticCenter>(world_.comm(), params.count(), host.data());
    });
    dist::agree_on(world_.comm(), [&] { counter_window = std::make_unique<dist::SampleCounter>(world_.comm(), first_sample); });
    dist::ElasticCenter& center = *center_window;
    dist::SampleCounter& counter = *counter_window;
    // Other ranks' reads and pushes aimed at this one progress while it computes: MPI is polled between layers.
    dist::RmaProgress progress(world_.comm());
    std::optional<BetweenLayersHook> poll_between_layers(std::in_place, &dist::RmaProgress::poll);
    center_ = &center;
    counter_ = &counter;

    const auto start = run_start_ = Clock::now();
    report_time_ = start;
    next_validation_ = (first_sample / validate_every_ + 1) * validate_every_;
    report_position_ = first_sample;
    last_checkpoint_step_ = s_.start_step;
    report_stats_ = counter.stats();
    beats_.assign(size_t(world_.size()), -1);
    beat_times_.assign(size_t(world_.size()), start);
    bool stopped = false;
    while (true) {
      // Bounds this local step, its one-sided operations included: a rank blocked in it for 2x
      // --stall-timeout (and a grace period) ends itself with one line.
      s_.arrival->watch(local_steps_);
      // The leader claims the group's samples and tells the members: [first, first + n), or a stop.
      // claim[1] > 0: samples [claim[0], +claim[1]); 0: the counter is exhausted; -1: a stop at claim[0].
      int64_t claim[2] = {0, 0};
      if (stop_requests() > 0 && !stop_sent_) counter.request_stop(), stop_sent_ = true;  // any rank's signal
      if (group_rank_ == 0) {
        // The oldest claim not yet in the center is in this leader's row (mid-run checkpoints need it).
        const bool track = checkpointer_.enabled() && !unpushed_;
        if (track) counter.begin_claim(world_.rank());
        const dist::SampleCounter::Claim c = counter.claim(group_batch_);
        if (c.stopped) {
          claim[0] = counter.stop_position(), claim[1] = -1;
        } else {
          claim[0] = c.first;
          claim[1] = std::max<int64_t>(0, std::min(group_batch_, total_samples_ - c.first));
        }
        if (track) counter.claimed_at(world_.rank(), c.stopped ? claim[0] : c.first);
        unpushed_ = checkpointer_.enabled() && (unpushed_ || claim[1] > 0);
      }
      if (group_arrival_) {  // the claim reaches the members in the group's arrival (exact in doubles)
        std::vector<double> v = {double(claim[0]), double(claim[1])};
        if (group_rank_ != 0) v = {0.0, 0.0};
        step_stats_.idle_us += micros(group_arrival_->arrive(local_steps_, v));
        group_arrival_->step_done();  // the step's later group collectives: bounded by the watch above
        claim[0] = int64_t(v[0]), claim[1] = int64_t(v[1]);
      }
      // Validation points up to what this claim shows to be passed: every rank reaches the same points in
      // the same order (the stop position is the same for all; exhaustion passes every point).
      validate_up_to(claim[1] > 0 ? claim[0] : claim[1] == 0 ? total_samples_ - 1 : claim[0]);
      if (claim[1] <= 0) {
        stopped = claim[1] < 0;
        break;
      }
      train_local_step(claim[0], claim[1]);
      if (local_steps_ % cfg_.elastic_every == 0) trade_with_center();
      if (world_.rank() == 0) {
        report(claim[0] + claim[1]);
        maybe_checkpoint(claim[0] + claim[1]);
      }
      watch_heartbeats();
    }
    // The group's local steps since its last trade go into the center too.
    if (local_steps_ % cfg_.elastic_every != 0) trade_with_center();
    publish_step(/*finished=*/true);
    const double train_seconds = seconds_since(start) - validation_seconds_;

    // Every rank is done pushing: the center is the model, on every rank alike. A rank that never gets
    // here is named (--stall-timeout).
    std::vector<double> none = {0.0};
    s_.arrival->arrive(total_samples_ / cfg_.global_batch, none);
    s_.arrival->step_done();
    const int64_t samples_done = samples_done_ = std::min(counter.claimed(), total_samples_);
    HT_MPI_CHECK(MPI_Barrier(world_.comm()));  // nobody closes the counter while another still reads it
    center.read(host.data());
    if (on_gpu()) params.values().copy_from(host);  // on the CPU, host is the parameters themselves
    center_ = nullptr;
    counter_ = nullptr;
    poll_between_layers.reset();
    progress.close();
    counter.close();
    center.close();
    sync_running_stats();

    TrainResult result;
    result.steps = samples_done / cfg_.global_batch;
    result.stopped_by_signal = stopped;
    // This rank's last window: the reported one, or the steps since when it holds any.
    result.final_loss = window_count_ > 0 ? window_loss_ / window_count_ : last_window_loss_;
    double all[2] = {double(trained_samples_), train_seconds};
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all[0], 1, MPI_DOUBLE, MPI_SUM, world_.comm()));
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all[1], 1, MPI_DOUBLE, MPI_MAX, world_.comm()));
    result.samples_per_second = all[1] > 0 ? all[0] / all[1] : 0;
    if (s_.val) {
      const EvalTotals e = validate(s_, world_.comm());
      result.val_accuracy = e.headline();
      if (world_.rank() == 0 && !cfg_.quiet)
        print_validation(samples_done, s_.train->info().num_samples, train_seconds, e);
    }
    // Resumed at the end: the checkpoint it came from already holds this position.
    nothing_left_ = first_sample >= total_samples_;
    if (checkpointer_.enabled() && !nothing_left_) save_checkpoint(samples_done);
    report_end(result, stopped);
    outputs_.finish(params);
    if (group_arrival_) group_arrival_->close();
    s_.arrival->close();
    return result;
  }

 private:
  bool on_gpu() const { return s_.device_kind == Device::CUDA; }

  // Collective: the center evaluated at every validation point not after `position` (and before the
  // end, which evaluates anyway). The ranks wait for each other here, so this time, like the evaluation,
  // is left out of the training clock.
  void validate_up_to(int64_t position) {
    if (!s_.val) return;
    while (next_validation_ <= position && next_validation_ < total_samples_) {
      const auto start = Clock::now();
      // Every rank comes here; one that does not within --stall-timeout is named.
      std::vector<double> none = {0.0};
      s_.arrival->arrive(next_validation_ / cfg_.global_batch, none);
      s_.arrival->step_done();  // the evaluation takes as long as it takes (as in sync mode)
      nn::ParamBuffer& params = s_.model->params();
      const Tensor values = params.values().clone(), states = params.states().clone();  // this rank's own
      Tensor host = params.values().to(Device::CPU);
      center_->read(host.data());
      if (on_gpu()) params.values().copy_from(host);
      sync_running_stats();
      const EvalTotals e = validate(s_, world_.comm());
      params.values().copy_from(values);
      params.states().copy_from(states);
      const double clock = seconds_since(run_start_) - validation_seconds_;
      if (world_.rank() == 0 && !cfg_.quiet) print_validation(next_validation_, s_.train->info().num_samples, clock, e);
      last_val_loss_ = e.loss_sum / std::max(1.0, e.count);
      last_val_accuracy_ = e.headline();
      next_validation_ += validate_every_;
      validation_seconds_ += seconds_since(start);
      s_.arrival->watch(local_steps_);
      beat_times_.assign(beat_times_.size(), Clock::now());  // nobody stepped while everyone validated
    }
  }

  // One local step of this rank inside its group's claim [first, first + n): its share's forward and
  // backward, the group's weighted reduction, the update, the group's rebalance.
  void train_local_step(int64_t first, int64_t n) {
    const Share share = member_share(member_batches_, group_rank_, n);
    const int64_t b = share.count;
    const StepInput in = take_batch(first, share);
    // fp16 ranks scale their loss (train/loss_scale.hpp); --debug-overflow-at makes the gradient NaN/Inf.
    const BackwardScale scale = backward_scale(s_, world_.rank(), local_steps_);
    ComputeClock clock;
    const LocalOutcome local = local_step_.run(in.batch, in.uploaded, b, {}, {}, scale.loss_scale);
    // Emulated speed changes (--emulate-schedule) happen at the same global step in every mode.
    const double compute = clock.stop(s_, world_.rank(), first / cfg_.global_batch, local_steps_ == 0);
    if (group_balancer_ && !clock.setup()) group_balancer_->record(b, compute);
    window_compute_ += compute;
    step_stats_.compute_us += micros(compute);
    step_stats_.samples += b;
    step_stats_.steps += 1;
    // Published once computed, before the group's reduction: a member that stops while computing is then
    // one step behind the members that wait for it (the stall watch names the one behind).
    publish_step();

    reduce_in_group(b, n, scale.rank_scale);
    const bool skipped = overflowed();  // its samples count as trained, as in the synchronous mode
    // The learning rate follows the samples consumed by all groups, in steps of the global batch.
    const int64_t step = std::min(first / cfg_.global_batch, s_.total_steps - 1);
    window_lr_ = s_.schedule->at(step);
    // The members of a group stay identical replicas.
    apply_update(s_, window_lr_, skipped, cfg_.debug_consistency && group_size_ > 1, group_,
                 "parameters within a hybrid group");
    rebalance_group();
    ++local_steps_;
    trained_samples_ += b;
    last_step_samples_ = b;
    window_loss_ += local.loss_sum;
    window_correct_ += local.correct;
    window_count_ += double(b);
  }

  struct StepInput {
    data::Batch batch;              // CPU ranks
    DeviceInput::Uploaded uploaded;  // GPU ranks
  };
  // This member's share of the claim starting at `first`, read now (the wait is data wait).
  StepInput take_batch(int64_t first, const Share& share) {
    const auto start = Clock::now();
    std::vector<int64_t> indices;
    for (const EpochPart& part : parts_by_epoch(first + share.offset, share.count, s_.train->info().num_samples)) {
      std::vector<int64_t> span = s_.plan->span(part.epoch, part.position, part.count);
      outputs_.log_samples(part.epoch, span);
      indices.insert(indices.end(), span.begin(), span.end());
    }
    const int64_t epoch = first / s_.train->info().num_samples;
    s_.train->submit(std::move(indices), cfg_.augment, augmentation_seed(cfg_.seed, epoch),
                     on_gpu() ? data::BatchForm::Raw : data::BatchForm::Float);
    StepInput in;
    in.batch = s_.train->next();
    if (on_gpu()) in.uploaded = s_.input->upload(in.batch);
    const double wait = seconds_since(start);
    window_wait_ += wait;
    step_stats_.wait_us += micros(wait);
    check_injected_failure(s_, world_.rank(), local_steps_, "local step");
    return in;
  }

  // The group's gradient, weighted by each member's share of the claim of n samples; a rank alone only
  // takes its loss scale back out.
  void reduce_in_group(int64_t b, int64_t n, double rank_scale) {
    nn::ParamBuffer& params = s_.model->params();
    if (group_comm_) {
      auto comm_start = Clock::now();
      group_comm_->weighted_allreduce(params.grads().data(), params.count(), double(b) / double(n) / rank_scale);
      const double comm = seconds_since(comm_start);
      window_comm_ += comm;
      step_stats_.comm_us += micros(comm);
    } else if (rank_scale != 1.0) {
      ops::scale(params.grads(), float(1.0 / rank_scale));  // a power of two: exact
    }
  }

  // fp16 (or an injected overflow): a local step whose gradient has NaN/Inf values is skipped and the scale
  // halved. The members of a hybrid group reduced to the same gradient, so they all decide alike without
  // asking each other. Other modes' ranks train on, as they always have, when no overflow was injected.
  bool overflowed() {
    if (!s_.loss_scaler.active() && s_.overflow_rank < 0) return false;
    const int64_t nonfinite = count_nonfinite(s_.model->params().grads());
    const std::string where = (group_size_ > 1 ? "group " + std::to_string(group_number(leader_))
                                               : "rank " + std::to_string(world_.rank())) +
                              ", local step " + std::to_string(local_steps_);
    if (!skip_for_overflow(s_.loss_scaler, nonfinite, where, /*agreed=*/false, group_rank_ == 0 && !cfg_.quiet))
      return false;
    step_stats_.skipped += 1;
    return true;
  }

  // The group's balancer: the members' shares of each claim follow their measured speeds, exactly as sync
  // mode's split does (dist/balancer.hpp), over the group's communicator and its claims of group_batch_
  // samples. Caps: the members' memory caps.
  void make_group_balancer() {
    dist::BalanceConfig bc = s_.balance_config;
    const int64_t mine = s_.memory_cap > 0 ? s_.memory_cap : INT64_MAX;
    std::vector<int64_t> caps(static_cast<size_t>(group_size_));
    HT_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT64_T, caps.data(), 1, MPI_INT64_T, group_));
    bc.caps.clear();
    if (std::any_of(caps.begin(), caps.end(), [](int64_t c) { return c < INT64_MAX; })) bc.caps = caps;
    group_balancer_ = std::make_unique<dist::Balancer>(group_, group_batch_, bc);
    member_batches_ = group_balancer_->split();
  }

  // After each local step, on every member alike: refit on schedule, or at once when a member's newest
  // step left its model (the members agree on that first).
  void rebalance_group() {
    if (!group_balancer_) return;
    dist::RefitVotes votes;
    votes.add(group_balancer_->vote(local_steps_));
    static_assert(sizeof(votes) == 4 * sizeof(int64_t), "RefitVotes travels as 4 int64");
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &votes, 4, MPI_INT64_T, MPI_SUM, group_));
    if (!group_balancer_->update(local_steps_, dist::early_refit_agreed(votes, group_size_))) return;
    member_batches_ = group_balancer_->split();
    if (world_.rank() == 0 && !cfg_.quiet) {
      std::printf("group rebalance: %s\n", group_balancer_->describe(local_steps_).c_str());
      std::fflush(stdout);
    }
  }

  // The group leader's elastic exchange with the center, then the group takes the leader's weights.
  void trade_with_center() {
    nn::ParamBuffer& params = s_.model->params();
    auto start = Clock::now();
    if (group_rank_ == 0) {
      Tensor local = on_gpu() ? params.values().to(Device::CPU) : params.values();
      center_values_.resize(size_t(params.count()));
      delta_.resize(size_t(params.count()));
      const int64_t seen = counter_->updates();
      const auto read_start = Clock::now();
      center_->read(center_values_.data());
      slowest_center_op_ = std::max(slowest_center_op_, seconds_since(read_start));
      const float alpha = cfg_.elastic_alpha;
      float* w = local.data();
      for (int64_t i = 0; i < params.count(); ++i) {
        delta_[size_t(i)] = alpha * (w[i] - center_values_[size_t(i)]);
        w[i] -= delta_[size_t(i)];
      }
      const auto add_start = Clock::now();
      center_->add(delta_.data());
      slowest_center_op_ = std::max(slowest_center_op_, seconds_since(add_start));
      // Staleness: the center updates by other groups between this read and this push.
      const int64_t staleness = counter_->count_update() - seen;
      staleness_sum_ += double(staleness);
      ++pushes_;
      step_stats_.pushes += 1;
      step_stats_.staleness += staleness;
      if (unpushed_) counter_->pushed(world_.rank()), unpushed_ = false;  // every claim so far is in the center
      if (on_gpu()) params.values().copy_from(local);
    }
    if (group_size_ > 1) {
      Tensor host = on_gpu() ? params.values().to(Device::CPU) : params.values();
      HT_MPI_CHECK(MPI_Bcast(host.data(), int(params.count()), MPI_FLOAT, 0, group_));
      if (on_gpu()) params.values().copy_from(host);
    }
    const double comm = seconds_since(start);
    window_comm_ += comm;
    step_stats_.comm_us += micros(comm);
  }

  // The group this rank trains with: hybrid mode's node, ranks of similar speed or --groups list; async
  // mode's group of one. Collective.
  MPI_Comm make_group_comm() {
    int color = world_.rank();
    if (s_.mode == Mode::Hybrid) {
      if (cfg_.groups == "speed") {
        speeds_.assign(size_t(world_.size()), 0.0);
        const double mine = measure_speed();
        HT_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_DOUBLE, speeds_.data(), 1, MPI_DOUBLE, world_.comm()));
        color = dist::speed_groups(speeds_, kSpeedGroupWithin)[size_t(world_.rank())];
      } else {
        const std::vector<int> listed = parse_groups(cfg_.groups, world_.size());
        if (listed.empty()) {  // "node": named after the lowest world rank on the node
          int lowest = world_.rank();
          HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, world_.node_comm()));
          color = lowest;
        } else {
          color = listed[size_t(world_.rank())];
        }
      }
    }
    MPI_Comm group = MPI_COMM_NULL;
    HT_MPI_CHECK(MPI_Comm_split(world_.comm(), color, world_.rank(), &group));
    HT_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
    return group;
  }

  // --groups speed: this rank's samples/s over a few local steps of its local batch (forward and backward
  // of the first samples of the run's order, emulated speed included): the fastest step after a warm-up
  // one, which keeps out steps slowed by a neighbour on a shared machine (the groups are fixed for the
  // run, so they follow what the devices can do rather than a passing load). Nothing is learnt: no SGD
  // step, and the batch-norm statistics are put back.
  double measure_speed() {
    constexpr int kSteps = 12;
    nn::ParamBuffer& params = s_.model->params();
    const Tensor states = params.states().clone();
    const int64_t b = std::min(local_batch_, s_.train->info().num_samples);
    std::vector<double> times;
    for (int k = 0; k < kSteps; ++k) {
      s_.train->submit(s_.plan->span(0, 0, b), false, cfg_.seed, on_gpu() ? data::BatchForm::Raw : data::BatchForm::Float);
      data::Batch batch = s_.train->next();
      DeviceInput::Uploaded input;
      if (on_gpu()) input = s_.input->upload(batch);
      const auto start = Clock::now();
      local_step_.run(batch, input, b);
      double compute = seconds_since(start);
      compute += s_.emulator.apply(world_.rank(), s_.start_step, compute);
      if (k > 0) times.push_back(compute);
    }
    params.states().copy_from(states);
    const double fastest = *std::min_element(times.begin(), times.end());
    return fastest > 0 ? double(b) / fastest : 0.0;
  }

  // This rank's row in the shared counter: what its last local step did (and whether it has finished).
  void publish_step(bool finished = false) {
    step_stats_.finished = finished ? 1 : 0;
    counter_->add_stats(world_.rank(), step_stats_);
    step_stats_ = dist::SampleCounter::RankStats{};
  }

  // Every rank watches every rank's local steps in the shared counter (a read every 0.25 s). A rank that
  // has not finished and made no local step for --stall-timeout (and a grace period) has stalled; inside
  // a hybrid group the members that wait for it are one step ahead of it (steps are published before the
  // group's reduction), so only the members furthest behind are named. The lowest rank that is not
  // stalled itself speaks (a rank blocked behind a stalled one cannot) and ends the job.
  void watch_heartbeats() {
    if (cfg_.stall_timeout <= 0 || world_.size() < 2) return;
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last_heartbeat_read_).count() < 0.25) return;
    last_heartbeat_read_ = now;
    const std::vector<dist::SampleCounter::RankStats> stats = counter_->stats();
    const double limit = cfg_.stall_timeout + heartbeat_grace(cfg_.stall_timeout);
    const int n = world_.size();
    std::vector<bool> stale(size_t(n), false);
    double longest = 0;
    for (int r = 0; r < n; ++r) {
      if (r == world_.rank() || stats[size_t(r)].finished) continue;
      if (stats[size_t(r)].steps != beats_[size_t(r)]) {
        beats_[size_t(r)] = stats[size_t(r)].steps;
        beat_times_[size_t(r)] = now;
        continue;
      }
      const double quiet = std::chrono::duration<double>(now - beat_times_[size_t(r)]).count();
      stale[size_t(r)] = quiet > limit;
      if (stale[size_t(r)]) longest = std::max(longest, quiet);
    }
    for (int r = 0; r < world_.rank(); ++r)
      if (!stale[size_t(r)] && !stats[size_t(r)].finished) return;  // a lower rank that runs speaks
    std::string stalled;
    for (int r = 0; r < n; ++r) {
      if (!stale[size_t(r)]) continue;
      bool behind = false;  // a stalled member of the same group further behind: r waits for it
      for (int q = 0; q < n; ++q)
        behind = behind || (stale[size_t(q)] && leaders_[size_t(q)] == leaders_[size_t(r)] &&
                            stats[size_t(q)].steps < stats[size_t(r)].steps);
      if (!behind)
        stalled += (stalled.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " on " + s_.hosts[size_t(r)];
    }
    if (stalled.empty()) return;
    std::fprintf(stderr,
                 "hetrain: error: %s%s made no local step for %.0f s (--stall-timeout %g): stopped, hung or far "
                 "slower than the others; ending the job\n",
                 error_context_prefix().c_str(), stalled.c_str(), longest, cfg_.stall_timeout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }

  // Rank 0, every --log-every of its local steps: the progress line (unless --quiet) and the metrics line
  // (--metrics) over the window since the last one: the global counter, every rank's and every group's
  // rate and staleness from the shared counter, rank 0's group's loss.
  void report(int64_t position) {
    const int every = std::max(1, cfg_.log_every);
    const bool print = !cfg_.quiet && cfg_.log_every > 0;
    if ((!print && !outputs_.writes_metrics()) || local_steps_ % every != 0) return;
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - report_time_).count();
    const std::vector<dist::SampleCounter::RankStats> stats = counter_->stats();
    const int n = world_.size();
    ElasticRecord rec;
    rec.mode = mode_name(s_.mode);
    rec.samples = position;
    rec.step = position / cfg_.global_batch;
    const int64_t per_epoch = s_.train->info().num_samples;
    rec.epoch = position / per_epoch;
    rec.loss = last_window_loss_ = window_loss_ / std::max(1.0, window_count_);
    rec.accuracy = window_correct_ / std::max(1.0, window_count_);
    rec.lr = window_lr_;
    rec.loss_scale = s_.loss_scaler.active() ? s_.loss_scaler.scale() : 0;
    rec.window_s = seconds;
    rec.val_loss = last_val_loss_, rec.val_accuracy = last_val_accuracy_;
    last_val_loss_ = last_val_accuracy_ = -1;
    rec.ranks.resize(size_t(n));
    std::vector<double> group_samples(size_t(n), 0.0);  // by leader
    double pushes = 0, staleness = 0;
    for (int r = 0; r < n; ++r) {
      const auto& now_r = stats[size_t(r)];
      const auto& then = report_stats_[size_t(r)];
      ElasticRecord::Rank& k = rec.ranks[size_t(r)];
      k.group = group_number(leaders_[size_t(r)]);
      k.samples = double(now_r.samples - then.samples);
      k.pushes = double(now_r.pushes - then.pushes);
      k.staleness = double(now_r.staleness - then.staleness);
      k.compute = 1e-6 * double(now_r.compute_us - then.compute_us);
      k.wait = 1e-6 * double(now_r.wait_us - then.wait_us);
      k.comm = 1e-6 * double(now_r.comm_us - then.comm_us);
      k.idle = 1e-6 * double(now_r.idle_us - then.idle_us);
      k.skipped = double(now_r.skipped - then.skipped);
      group_samples[size_t(leaders_[size_t(r)])] += k.samples;
      pushes += k.pushes, staleness += k.staleness;
    }
    for (int r = 0; r < n; ++r) rec.ranks[size_t(r)].group_samples = group_samples[size_t(leaders_[size_t(r)])];
    outputs_.write_metrics(rec);
    report_stats_ = stats;
    if (print) {
      const double rate = seconds > 0 ? double(position - report_position_) / seconds : 0;
      std::string groups;  // hybrid: each group's rate since the last line
      if (s_.mode == Mode::Hybrid) {
        for (int r = 0; r < n; ++r) {
          if (leaders_[size_t(r)] != r) continue;
          char part[64];
          std::snprintf(part, sizeof part, "%s%d: %.0f", groups.empty() ? "" : ", ", group_number(r),
                        seconds > 0 ? group_samples[size_t(r)] / seconds : 0.0);
          groups += part;
        }
        groups = "  groups [" + groups + "] samples/s";
      }
      char acc[24] = "";  // a detector is scored by mAP, not accuracy
      if (!s_.detection) std::snprintf(acc, sizeof acc, "  acc %6.2f%%", 100.0 * rec.accuracy);
      std::printf("samples %lld/%lld  epoch %.2f/%d  loss %.4f%s  lr %.4g  %8.1f samples/s (all ranks)%s"
                  "  staleness %.2f  compute %.0f%%\n",
                  (long long)position, (long long)total_samples_, double(position) / double(per_epoch), cfg_.epochs,
                  rec.loss, acc, window_lr_, rate, groups.c_str(), pushes > 0 ? staleness / pushes : 0.0,
                  100.0 * window_compute_ / std::max(1e-9, window_compute_ + window_wait_ + window_comm_));
      std::fflush(stdout);
    }
    report_time_ = now;
    report_position_ = position;
    window_loss_ = window_correct_ = window_count_ = 0;
    window_compute_ = window_wait_ = window_comm_ = 0;
  }

  // Rank 0 alone, while the others train on: a checkpoint of the center every --checkpoint-every global
  // steps of samples and every --checkpoint-minutes. It is written at the settled position (every claim
  // before it is in the center: a resume loses no sample and trains the claims past it again), with rank
  // 0's optimizer momentum and batch-norm statistics (the end of the run averages the latter).
  void maybe_checkpoint(int64_t position) {
    if (!checkpointer_.enabled()) return;
    const int64_t B = cfg_.global_batch, every = cfg_.checkpoint_every;
    const bool by_steps = every > 0 && (position / B) / every > last_checkpoint_step_ / every;
    if (!by_steps && !checkpointer_.due_by_time()) return;
    const int64_t settled = counter_->settled_position();
    if (settled < 0) return;  // a leader is claiming: at the next local step
    const int64_t step = std::min(settled, total_samples_) / B;
    if (step <= last_checkpoint_step_ || (!checkpointer_.due_by_time() && step / every <= last_checkpoint_step_ / every))
      return;
    nn::ParamBuffer& params = s_.model->params();
    CheckpointTensors t;
    t.values.resize(size_t(params.count()));
    center_->read(t.values.data());
    const Tensor states = params.states().to(Device::CPU), momentum = s_.sgd->momentum_buffer().to(Device::CPU);
    t.states.assign(states.data(), states.data() + states.numel());
    t.momentum.assign(momentum.data(), momentum.data() + momentum.numel());
    t.num_batches_tracked = step;
    CheckpointInfo info = checkpoint_info(cfg_, s_, step, world_.size());
    info.sample_position = std::min(settled, total_samples_);
    info.split = all_batches_;
    checkpointer_.write_alone(info, params, t);
    last_checkpoint_step_ = step;
  }

  // Groups numbered 0, 1, ... in the order of their leaders' ranks.
  int group_number(int leader) const {
    int number = 0;
    for (int r = 0; r < leader; ++r) number += leaders_[size_t(r)] == r;
    return number;
  }

  void announce() {
    const std::string table =
        world_.rank_table(s_.mode == Mode::Hybrid ? s_.device + ", group " + std::to_string(group_number(leader_)) : s_.device);
    std::vector<int64_t>& batches = all_batches_;
    batches.resize(size_t(world_.size()));
    HT_MPI_CHECK(MPI_Allgather(&local_batch_, 1, MPI_INT64_T, batches.data(), 1, MPI_INT64_T, world_.comm()));
    const std::vector<int>& leaders = leaders_;
    if (world_.rank() != 0) return;
    print_notes(s_.notes);
    if (!cfg_.quiet) {
      const auto& info = s_.train->info();
      std::printf("hetrain: %d rank(s), mode %s\n%s", world_.size(), mode_name(s_.mode), table.c_str());
      std::printf("data: %s — %lld samples, %dx%dx%d, %d classes\n", info.path.c_str(), (long long)info.num_samples,
                  info.channels, info.height, info.width, info.num_classes);
      std::printf("model: %s, %lld parameters; %d epoch(s) = %lld samples, lr schedule in steps of %lld samples, "
                  "peak lr %.4g\n",
                  cfg_.model.c_str(), (long long)s_.model->param_count(), cfg_.epochs, (long long)total_samples_,
                  (long long)cfg_.global_batch, s_.schedule->peak_lr());
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
      for (size_t r = 0; r < speeds_.size(); ++r) speeds += (r ? ", " : "") + std::to_string(std::lround(speeds_[r]));
      std::printf("elastic averaging: alpha %g every %d local step(s); groups %s%s; local batches [%s]\n",
                  cfg_.elastic_alpha, cfg_.elastic_every, groups.c_str(),
                  speeds.empty() ? "" : (" by measured speed [" + speeds + "] samples/s").c_str(), local.c_str());
      if (cfg_.precision != Precision::FP32) std::printf("%s\n", precision_text(cfg_.precision).c_str());
      if (s_.start_step > 0)
        std::printf("resuming at sample %lld of %lld\n", (long long)s_.start_sample,
                    (long long)total_samples_);
      if (s_.emulator.active()) std::printf("%s\n", s_.emulator.describe().c_str());
    }
    std::fflush(stdout);
  }

  // Batch-norm running statistics: every rank saw its own samples; one set by the rule of every mode
  // (train/running_stats.hpp), each rank weighted by the samples of its last local step.
  void sync_running_stats() {
    average_running_stats(*s_.comm, world_.comm(), s_.model->params(), last_step_samples_, cfg_.debug_consistency);
  }

  void save_checkpoint(int64_t samples_done) {
    // Named by the step of the global batch it falls in; a resume continues at the exact sample.
    CheckpointInfo info = checkpoint_info(cfg_, s_, samples_done / cfg_.global_batch, world_.size());
    info.sample_position = samples_done;
    info.split = all_batches_;
    checkpointer_.write(info, s_.model->params(), *s_.sgd, *s_.arrival, total_samples_ / cfg_.global_batch);
  }

  void report_end(const TrainResult& result, bool stopped) {
    double staleness[2] = {staleness_sum_, double(pushes_)};
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, staleness, 2, MPI_DOUBLE, MPI_SUM, world_.comm()));
    double slowest = slowest_center_op_;
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, world_.comm()));
    // Each reduction (a hybrid group, an async rank) keeps its own scale: the skips are counted per leader.
    double skipped = group_rank_ == 0 ? double(s_.loss_scaler.skipped()) : 0.0;
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &skipped, 1, MPI_DOUBLE, MPI_SUM, world_.comm()));
    if (world_.rank() != 0) return;
    if (s_.loss_scaler.active() && !cfg_.quiet)
      std::printf("fp16: %lld local step(s) skipped for overflow over all %s, rank 0's loss scale %g\n",
                  (long long)skipped, s_.mode == Mode::Hybrid ? "groups" : "ranks", s_.loss_scaler.scale());
    if (stopped)
      std::printf("stopped after %lld of %lld samples (stop signal)%s\n", (long long)samples_done_,
                  (long long)total_samples_, checkpointer_.enabled() ? "; continue with --resume auto" : "");
    char val[48] = "";
    if (result.val_accuracy >= 0 && s_.detection)
      std::snprintf(val, sizeof val, ", val mAP@0.5 %.4f", result.val_accuracy);
    else if (result.val_accuracy >= 0)
      std::snprintf(val, sizeof val, ", val accuracy %.2f%%", 100.0 * result.val_accuracy);
    if (!cfg_.quiet && nothing_left_)
      std::printf("done: nothing left to train, the run was already at sample %lld of %lld\n",
                  (long long)total_samples_, (long long)total_samples_);
    else if (!cfg_.quiet)
      std::printf("done: %lld step(s) of %lld samples, %.1f samples/s, %lld center updates (mean staleness %.2f, "
                  "slowest read or push %.1f ms), final train loss %.4f%s\n",
                  (long long)result.steps, (long long)cfg_.global_batch, result.samples_per_second,
                  (long long)staleness[1], staleness[1] > 0 ? staleness[0] / staleness[1] : 0.0, 1e3 * slowest,
                  result.final_loss, val);
    std::fflush(stdout);
  }

  const TrainConfig& cfg_;
  dist::World& world_;
  Setup s_;
  Outputs outputs_;
  Checkpointer checkpointer_;
  LocalStep local_step_;
  MPI_Comm group_ = MPI_COMM_NULL;
  int group_rank_ = 0, group_size_ = 1;
  int leader_ = 0;                   // world rank of this group's leader
  std::vector<int> leaders_;         // every rank's group leader
  std::unique_ptr<dist::StepArrival> group_arrival_;  // groups of two or more: the members meet each local step
  std::unique_ptr<dist::Balancer> group_balancer_;     // groups of two or more, unless --balance none
  std::vector<double> speeds_;       // --groups speed: every rank's measured samples/s
  std::vector<int64_t> all_batches_;  // every rank's local batch
  dist::SampleCounter::RankStats step_stats_;  // this rank's last local step, published after it
  std::vector<dist::SampleCounter::RankStats> report_stats_;  // rank 0: every rank's row at the last line
  std::vector<int64_t> beats_;       // the local steps last seen of each rank
  std::vector<Clock::time_point> beat_times_;  // ... and when they last changed
  Clock::time_point last_heartbeat_read_{};
  bool unpushed_ = false;            // group leaders: a claim not yet pushed into the center
  int64_t last_checkpoint_step_ = 0;  // rank 0: the step of the newest checkpoint
  double last_val_loss_ = -1, last_val_accuracy_ = -1;  // rank 0: the newest validation, for the metrics line
  std::unique_ptr<dist::Communicator> group_comm_;  // groups of two or more: the in-group reduction
  int64_t local_batch_ = 1, group_batch_ = 1, total_samples_ = 0;
  int64_t samples_done_ = 0;  // claimed, hence trained, when the run ended (exact; result.steps rounds down)
  bool nothing_left_ = false;  // resumed where the run ends: no sample was trained
  std::vector<int64_t> member_batches_;
  dist::ElasticCenter* center_ = nullptr;
  dist::SampleCounter* counter_ = nullptr;
  std::vector<float> center_values_, delta_;
  bool stop_sent_ = false;
  int64_t local_steps_ = 0, trained_samples_ = 0, pushes_ = 0;
  int64_t last_step_samples_ = 0;  // this rank's samples in its last local step (the weight of its BN statistics)
  double staleness_sum_ = 0;
  double slowest_center_op_ = 0;  // seconds: the longest center read or push of this rank
  double window_loss_ = 0, window_correct_ = 0, window_count_ = 0, last_window_loss_ = 0;
  double window_compute_ = 0, window_wait_ = 0, window_comm_ = 0;
  float window_lr_ = 0;
  Clock::time_point report_time_;  // rank 0: of the last progress line (or the start)
  Clock::time_point run_start_;
  int64_t validate_every_ = 1, next_validation_ = 0;
  double validation_seconds_ = 0;   // left out of the training clock
  int64_t report_position_ = 0;
};

}  // namespace

TrainResult run_elastic_training(const TrainConfig& config) {
  install_stop_handlers();
  ElasticTrainer trainer(config);
  return trainer.run();
}

}  // namespace hetrain::train
