// The synchronous mode (docs/architecture.md, "One synchronous step"): every rank takes its share of each
// global batch, the gradients are reduced weighted by the shares, every replica applies the same update.
// The loop around the steps is train/loop.hpp.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <optional>

#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/train.hpp"
#include "train/checkpointer.hpp"
#include "train/local_step.hpp"
#include "train/loop.hpp"
#include "train/report.hpp"
#include "train/running_stats.hpp"
#include "train/stop_signals.hpp"
#include "train/sync_plan.hpp"
#include "train/sync_report.hpp"

namespace hetrain::train {
namespace {

// What every rank learns in a step's agreement (dist::StepArrival), summed over the ranks.
struct StepFlags {
  double stop = 0;             // ranks that received a stop signal
  double checkpoint_due = 0;   // rank 0: --checkpoint-minutes have passed
  double output_failed = 0;    // rank 0: a metrics write failed
  dist::RefitVotes votes;      // the ranks' early-refit votes (dist::RankBalance::vote)
};

// Loss, accuracy, sample count and non-finite gradient values summed over ranks.
struct Totals {
  double loss_sum = 0, correct = 0, count = 0, nonfinite = 0;
  // Inside a step: the wait is watched (a rank that stops here is named).
  void allreduce(MPI_Comm comm, dist::StepArrival& arrival) {
    double v[4] = {loss_sum, correct, count, nonfinite};
    MPI_Request r;
    HT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, v, 4, MPI_DOUBLE, MPI_SUM, comm, &r));
    arrival.wait(&r, 1);
    loss_sum = v[0], correct = v[1], count = v[2], nonfinite = v[3];
  }
};

// The steps after the first (which pays one-off costs: allocation, page faults), for the run's rate and
// the share of exposed communication.
struct TimedSteps {
  double seconds = 0, exposed = 0;
  int64_t samples = 0;
};

class SyncMode final : public TrainingMode {
 public:
  explicit SyncMode(TrainingRun& run)
      : cfg_(run.cfg),
        world_(run.world),
        s_(run.s),
        outputs_(run.outputs),
        checkpointer_(run.checkpointer),
        local_step_(s_, cfg_.label_smoothing),
        planner_(cfg_, s_, world_, outputs_.logs_samples()),
        report_(cfg_, s_, world_) {
    // A rank waiting in the gradient reduction tells the stall watch it is alive, so one that stopped
    // there is named (dist/arrival.hpp).
    s_.comm->set_idle_hook([this] { s_.arrival->keep_alive(); });
    if (s_.powersgd_q_comm) s_.powersgd_q_comm->set_idle_hook([this] { s_.arrival->keep_alive(); });
  }

  void announce() override { report_.announce(checkpointer_); }

  void begin() override {
    // Started buckets advance between layers: MPI moves a reduction only inside MPI calls.
    if (s_.buckets && s_.comm->overlaps())
      progress_.emplace([this] {
        if (compressing_) s_.powersgd->progress();
        else s_.buckets->progress();
      });
    planner_.fill();
  }

  StepEnd step(TrainResult& result) override {
    StepEnd end;
    if (planner_.empty()) {
      end.finished = true;
      return end;
    }
    const PlannedStep plan = planner_.pop();
    StepFlags flags;
    StepRecord rec = train_step(plan, flags);
    if (flags.output_failed > 0) outputs_.fail_agreed();
    end.stop_signal = flags.stop > 0;
    end.stop_here = cfg_.stop_at_step > 0 && plan.global_step + 1 >= cfg_.stop_at_step;
    if (!end.stopping()) {  // request what comes next before logging, so reading overlaps
      if (split_changed_) planner_.replan();
      split_changed_ = false;
      planner_.fill();
    }
    if (plan.global_step > s_.start_step) {  // the first step pays one-off costs (allocation, page faults)
      timed_.seconds += rec.step_seconds;
      timed_.samples += plan.global_batch;
      if (world_.rank() == 0) timed_.exposed += rec.exposed_share() * rec.step_seconds;
    }
    if (world_.rank() == 0) report_.step(rec, result, end.stopping());
    result.steps = steps_done_ = plan.global_step + 1;
    if (result.steps % s_.plan->steps_per_epoch() == 0 || result.steps == s_.total_steps) end.epoch_ended = plan.epoch;
    end.position = samples_after(plan);
    end.position_before = end.position - plan.global_batch;
    // Without --checkpoint-dir a stop writes nothing (no file lands in the working folder).
    end.checkpoint_due = (checkpointer_.enabled() && end.stopping()) || checkpointer_.due_by_steps(result.steps) ||
                         flags.checkpoint_due > 0;
    end.finished = planner_.empty();
    end.record = rec;
    stopped_ = end.stopping();
    return end;
  }

  int64_t validation_every() const override { return cfg_.val_every_samples; }

  // With --ema-decay the moving average is what is validated (as YOLOv5 validates its EMA).
  EvalTotals evaluate(int64_t /*point*/) override {
    sync_running_stats();
    if (!s_.ema) return validate(s_, world_.comm());
    optim::AverageSwappedIn average(*s_.ema, s_.model->params());
    sync_running_stats();
    return validate(s_, world_.comm());
  }

  void average_running_stats() override { sync_running_stats(); }

  RunEnd end(TrainResult& result) override {
    progress_.reset();
    if (stopped_ && world_.rank() == 0) {  // even with --quiet: the run did not finish
      std::printf("stopped after step %lld of %lld (%s)%s\n", (long long)result.steps, (long long)s_.total_steps,
                  result.stopped_by_signal ? "stop signal" : "--stop-at-step",
                  checkpointer_.enabled()      ? "; continue with --resume auto"
                  : result.stopped_by_signal ? "; no checkpoint written (no --checkpoint-dir): exit status 76"
                                             : "");
      std::fflush(stdout);
    }
    result.samples_per_second = timed_.seconds > 0 ? timed_.samples / timed_.seconds : 0;
    RunEnd end;  // always a checkpoint at the end of training
    end.checkpoint_due = checkpointer_.enabled() && checkpointer_.last_step() != result.steps && result.steps > s_.start_step;
    return end;
  }

  void summary(const TrainResult& result) override { report_.summary(result, timed_.seconds, timed_.exposed); }

 private:
  bool on_gpu() const { return s_.device_kind == Device::CUDA; }

  // One synchronous step: the local batch's forward and backward (one per micro-batch with --accumulate),
  // the step's agreement, the weighted reduction, the update; rank 0 gets every rank's times for its record.
  StepRecord train_step(const PlannedStep& plan, StepFlags& flags) {
    const auto step_start = Clock::now();
    StepTimes mine;
    check_injected_failure(s_, world_.rank(), plan.global_step, "step");
    // An FP16 rank backpropagates its loss times the scale and divides it out in its reduction weight; the
    // other ranks' gradients are unscaled.
    const BackwardScale scale = backward_scale(s_, world_.rank(), plan.global_step);
    remember_running_stats(s_);
    const LocalOutcome local = compute(plan, scale, mine);
    flags = agree(plan, mine);
    const Totals step_totals = reduce(local, plan.global_step, plan.local_samples(), reduction_weight(plan, scale), mine);
    // fp16: a step with NaN/Inf is skipped on every rank alike (they all saw the same reduced gradient).
    const bool skipped =
        skip_for_overflow(s_.loss_scaler, int64_t(step_totals.nonfinite / world_.size()),
                          "step " + std::to_string(plan.global_step) + " (sync mode)" + wire_note(), /*agreed=*/true,
                          world_.rank() == 0 && !cfg_.quiet);
    const optim::StepRates rates = step_rates(s_, plan.global_step);
    const float lr = rates.lr;
    apply_update(s_, rates, skipped, cfg_.debug_consistency, world_.comm(), "parameters");
    if (s_.ema && !skipped) s_.ema->update(s_.model->params());
    outputs_.log_samples(plan.epoch, plan.indices);
    rebalance(plan, flags);
    last_split_ = plan.split;

    StepRecord rec = gather_record(plan, step_totals, lr, skipped, mine);
    rec.step_seconds = seconds_since(step_start);
    report_.add(step_totals.loss_sum, step_totals.correct, step_totals.count);
    return rec;
  }

  // FP16 on the wire has half precision's range: a reduced gradient above 65504 arrives as Inf.
  std::string wire_note() const {
    return s_.wire == dist::Wire::FP16 ? " with --reduce-precision fp16 (values above 65504 become Inf on the wire; "
                                         "bf16 keeps FP32's range)"
                                       : "";
  }

  // A step's micro-batches add up in the gradient buffer (the layers accumulate their parameters'
  // gradients): micro-batch k's backward is of this rank's mean loss over its b_k samples times b_k/b,
  // b its share of a whole micro-batch, so the buffer holds Σ over the step's samples of the per-sample
  // gradients / b. Weighted b/S in the reduction, S the step's samples, the ranks' buffers add up to the mean
  // over the step for any split. Without --accumulate: b_k = b, S = B, the weight b_r/B (times 1/the FP16
  // scale, which the backward carried).
  double share_base(const PlannedStep& plan) const {
    return plan.micro.size() == 1 ? double(plan.local_batch()) : double(std::max<int64_t>(1, plan.local_batch()));
  }
  double reduction_weight(const PlannedStep& plan, const BackwardScale& scale) const {
    return share_base(plan) / double(plan.global_batch) / scale.rank_scale;
  }

  // A micro-batch's batch: on a GPU uploaded during the previous micro-batch or step, else taken from the
  // reader now (the wait for it is data wait).
  struct StepInput {
    data::Batch batch;              // CPU ranks
    DeviceInput::Uploaded uploaded;  // GPU ranks
  };
  StepInput take_batch(int64_t b, double& wait) {
    const auto start = Clock::now();
    StepInput in;
    if (staged_) {  // GPU: uploaded during the previous micro-batch
      in.uploaded = *staged_;
      staged_.reset();
    } else {
      in.batch = s_.train->next();
      if (on_gpu()) in.uploaded = s_.input->upload(in.batch);
    }
    wait += seconds_since(start);
    const int64_t got = on_gpu() ? in.uploaded.n : int64_t(in.batch.labels.size());
    HT_CHECK(got == b, "internal: batch of ", got, " samples for a share of ", b);
    return in;
  }

  // Forward and backward of each micro-batch, the buckets started as the last one's gradients become
  // final, the compute time (emulated speed included) recorded for the balancer.
  LocalOutcome compute(const PlannedStep& plan, const BackwardScale& scale, StepTimes& mine) {
    // --bn sync and a detector's match counts meet the other ranks inside the local step: bounded like the
    // step's collectives.
    if (s_.batch_exchange) {
      s_.arrival->watch(plan.global_step);
      s_.batch_exchange->bound_by(s_.arrival.get(), plan.global_step);
    }
    StepInput first = take_batch(plan.micro.front().split[size_t(world_.rank())], mine.wait);
    ComputeClock clock;
    const size_t count = plan.micro.size();
    const double base = share_base(plan);
    LocalOutcome total;
    double inner_wait = 0;  // waits for batches inside the clock: the next one's, and the later micro-batches'
    for (size_t k = 0; k < count; ++k) {
      const MicroBatch& m = plan.micro[k];
      const int64_t b = m.split[size_t(world_.rank())];
      const bool last = k + 1 == count;
      const StepInput in = k == 0 ? std::move(first) : take_batch(b, inner_wait);
      set_batch_norm_step(s_, b, base / double(m.size) / scale.rank_scale);
      if (last && bucketed(plan.global_step)) s_.buckets->begin(s_.model->params().grads().data(), reduction_weight(plan, scale));
      if (last && overlapped_compression(plan.global_step)) {
        s_.powersgd->begin(*s_.comm, *s_.powersgd_q_comm, s_.model->params().grads().data(), reduction_weight(plan, scale),
                           s_.wire);
        compressing_ = true;
      }
      const float loss_scale = count == 1 || b == 0 ? scale.loss_scale : float(scale.loss_scale * (double(b) / base));
      // On a GPU, while this micro-batch computes there, the next one (requested long ago) is taken from the
      // reader and uploaded into the other slot; the wait for it counts as data wait, not compute.
      const bool more = !last || !planner_.empty();
      const LocalOutcome o = local_step_.run(in.batch, in.uploaded, b, [&] {
        if (!more) return;
        auto wait_start = Clock::now();
        data::Batch next = s_.train->next();
        inner_wait += seconds_since(wait_start);
        staged_ = s_.input->upload(next);
      }, last ? grads_final_hook(plan.global_step) : nn::GradsFinal(), loss_scale, /*accumulate=*/k > 0);
      total.loss_sum += o.loss_sum;
      total.correct += o.correct;
    }
    // Every rank starts every bucket before the agreement, also a rank with b_r = 0 (it ran no backward).
    auto exposed_start = Clock::now();
    if (bucketed(plan.global_step)) s_.buckets->start_rest();
    if (overlapped_compression(plan.global_step)) s_.powersgd->start_rest();
    mine.exposed = seconds_since(exposed_start);
    // The balancer counts the steps of this process: a resumed run calibrates again (its ranks, their
    // devices and their load may have changed). Set-up steps are no sample of the rank's speed. It fits the
    // time of one micro-batch of the split it chooses: a step of whole micro-batches counts as their mean.
    const int64_t local_step = plan.global_step - s_.start_step;
    mine.compute = clock.stop(s_, world_.rank(), plan.global_step, local_step == 0, inner_wait);
    mine.wait += inner_wait;
    mine.batch = double(plan.local_samples());
    const bool whole = std::all_of(plan.micro.begin(), plan.micro.end(),
                                   [&](const MicroBatch& m) { return m.split == plan.split; });
    if (s_.fixed_split.empty() && !clock.setup() && (count == 1 || whole))
      s_.balancer->record(plan.local_batch(), mine.compute / double(count));
    return total;
  }

  // Every rank arrives here before the reduction; a rank that never does is named (--stall-timeout).
  // The wait for slower ranks is idle time, not compute or communication.
  StepFlags agree(const PlannedStep& plan, StepTimes& mine) {
    dist::RefitVotes vote;
    if (s_.fixed_split.empty()) vote.add(s_.balancer->vote(plan.global_step - s_.start_step));
    std::vector<double> agreed = {stop_requests() > 0 ? 1.0 : 0.0,
                                  world_.rank() == 0 && checkpointer_.due_by_time() ? 1.0 : 0.0,
                                  world_.rank() == 0 && outputs_.metrics_failed() ? 1.0 : 0.0};
    vote.append_to(agreed);
    mine.idle = s_.arrival->arrive(plan.global_step, agreed);
    return StepFlags{agreed[0], agreed[1], agreed[2], dist::RefitVotes::read(agreed, 3)};
  }

  // The weighted reduction of the gradients, then the step's totals. The reduced gradient is the same on
  // every rank; counting its NaN/Inf values rides on the totals' reduction, so every rank stops at the
  // same step with the same message.
  Totals reduce(const LocalOutcome& local, int64_t step, int64_t samples, double weight, StepTimes& mine) {
    nn::ParamBuffer& params = s_.model->params();
    auto comm_start = Clock::now();
    if (overlapped_compression(step)) {
      s_.powersgd->finish();
      compressing_ = false;
    } else if (compressed(step)) {
      s_.powersgd->reduce(*s_.comm, params.grads().data(), weight, s_.wire);
    } else if (s_.buckets)
      s_.buckets->finish();
    else
      s_.comm->weighted_allreduce(params.grads().data(), params.count(), weight, s_.wire);
    mine.exposed += seconds_since(comm_start);
    Totals step_totals{local.loss_sum, local.correct, double(samples), double(count_nonfinite(params.grads()))};
    step_totals.allreduce(world_.comm(), *s_.arrival);
    mine.comm = seconds_since(comm_start);
    return step_totals;
  }

  // A rank whose newest steps left its model (a straggler began or ended) makes everyone refit now,
  // unless every rank moved together (contention: no rank's relative speed changed).
  void rebalance(const PlannedStep& plan, const StepFlags& flags) {
    if (!s_.fixed_split.empty()) return;
    const int64_t local_step = plan.global_step - s_.start_step;
    split_changed_ = s_.balancer->update(local_step, dist::early_refit_agreed(flags.votes, world_.size()));
    if (split_changed_ && world_.rank() == 0 && !cfg_.quiet) {
      std::printf("rebalance: %s\n", s_.balancer->describe(plan.global_step).c_str());
      std::fflush(stdout);
    }
  }

  // The step's record; rank 0 gathers every rank's times into it.
  StepRecord gather_record(const PlannedStep& plan, const Totals& step_totals, float lr, bool skipped,
                           const StepTimes& mine) {
    StepRecord rec;
    rec.step = plan.global_step;
    rec.epoch = plan.epoch;
    rec.lr = lr;
    rec.skipped = skipped;
    rec.loss_scale = s_.loss_scaler.active() ? s_.loss_scaler.scale() : 0;
    rec.loss = step_totals.loss_sum / std::max(1.0, step_totals.count);
    rec.accuracy = step_totals.correct / std::max(1.0, step_totals.count);
    rec.ranks.resize(world_.size());
    StepTimes sent = mine;
    sent.memory = memory_figures();
    constexpr int kDoubles = int(sizeof(StepTimes) / sizeof(double));
    static_assert(sizeof(StepTimes) == kDoubles * sizeof(double), "StepTimes travels as doubles");
    MPI_Request gathered;
    HT_MPI_CHECK(MPI_Igather(&sent, kDoubles, MPI_DOUBLE, rec.ranks.data(), kDoubles, MPI_DOUBLE, 0, world_.comm(),
                             &gathered));
    s_.arrival->wait(&gathered, 1);
    s_.arrival->step_done();
    return rec;
  }

  // --compress from --compress-start on: PowerSGD in place of the exact buckets, in buckets of its own
  // during backward when there are buckets (its Q's on a communicator of their own), else after it.
  bool compressed(int64_t step) const { return s_.powersgd && step >= cfg_.compress_start; }
  bool bucketed(int64_t step) const { return s_.buckets && !compressed(step); }
  bool overlapped_compression(int64_t step) const { return s_.powersgd_q_comm && compressed(step); }

  nn::GradsFinal grads_final_hook(int64_t step) {
    if (bucketed(step)) return [this](int64_t first_final) { s_.buckets->grads_final(first_final); };
    if (overlapped_compression(step)) return [this](int64_t first_final) { s_.powersgd->grads_final(first_final); };
    return {};
  }

  // Batch-norm running statistics differ per rank (each saw its own samples): one set for evaluation and
  // the final model, averaged by the rule of every mode (train/running_stats.hpp), here b_r/B. The moving
  // average's statistics (--ema-decay) are made one set the same way when it is swapped in.
  // `watched_step` >= 0: bounded, as a meeting of that step (before a checkpoint).
  void sync_running_stats(int64_t watched_step = -1) {
    const int64_t mine = last_split_.empty() ? 0 : last_split_[size_t(world_.rank())];
    train::average_running_stats(*s_.comm, world_.comm(), s_.model->params(), mine, cfg_.debug_consistency,
                                 watched_step >= 0 ? s_.arrival.get() : nullptr, watched_step);
  }

  // Samples trained when `plan`'s step is done: full steps before its epoch and within it.
  int64_t samples_after(const PlannedStep& plan) const {
    int64_t in_epoch = 0;
    for (int64_t k = 0; k <= plan.step_in_epoch; ++k) in_epoch += s_.plan->batch_size(k);
    return plan.epoch * s_.train->info().num_samples + in_epoch;
  }

  // Batch-norm statistics are synced first, so the file holds the one set every rank would evaluate with.
  void save_checkpoint() override {
    const int64_t steps_done = steps_done_;
    // The statistics' average is a bounded meeting: a rank stopped in it is named.
    sync_running_stats(steps_done - 1);
    if (s_.ema) {  // the average's statistics, one set as well
      optim::AverageSwappedIn average(*s_.ema, s_.model->params());
      sync_running_stats(steps_done - 1);
    }
    CheckpointInfo info = checkpoint_info(cfg_, s_, steps_done, world_.size());
    info.split = last_split_;
    if (s_.balancer) {
      const auto& models = s_.balancer->planner().models();
      for (size_t r = 0; r < models.size() && r < info.alpha.size(); ++r)
        info.alpha[r] = models[r].alpha, info.beta[r] = models[r].beta;
    }
    checkpointer_.write(info, s_.model->params(), *s_.sgd, *s_.arrival, steps_done - 1, s_.ema.get(), s_.powersgd.get());
  }

 private:
  const TrainConfig& cfg_;
  dist::World& world_;
  Setup& s_;
  Outputs& outputs_;
  Checkpointer& checkpointer_;
  LocalStep local_step_;
  SyncPlanner planner_;
  SyncReport report_;
  std::optional<DeviceInput::Uploaded> staged_;  // GPU: the next step's batch, already on its way
  bool split_changed_ = false;   // the balancer changed the split after the last step
  std::vector<int64_t> last_split_;
  int64_t steps_done_ = 0;
  bool stopped_ = false;  // a stop signal or --stop-at-step ended the steps
  TimedSteps timed_;
  std::optional<BetweenLayersHook> progress_;  // while training
  bool compressing_ = false;  // between a PowerSGD step's begin and finish: progress moves its buckets
};

}  // namespace

std::unique_ptr<TrainingMode> make_sync_mode(TrainingRun& run) { return std::make_unique<SyncMode>(run); }

}  // namespace hetrain::train
