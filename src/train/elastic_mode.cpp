// The asynchronous and hybrid training modes (docs/architecture.md, "Training modes"): shared-memory
// elastic averaging SGD over a center model in MPI one-sided memory (dist/elastic.hpp).
//
// Every rank belongs to a group: in async mode a group of one, in hybrid mode the ranks of a node (or of
// --groups). A group trains like a small synchronous job: its leader claims the group's next samples from
// the global counter, each member takes its share (fitted to the members' measured speeds by a balancer on
// the group's communicator, as sync mode's split is, unless --balance none), the members' gradients are
// reduced weighted by their shares, and every member applies the same SGD step. Every tau local steps the
// leader trades with the center: delta = alpha (W_local - W_center), W_local -= delta, W_center += delta;
// then the group takes the leader's weights. Groups never wait for each other. Training ends when the counter has handed out every
// sample of every epoch; the center is then the model: it is evaluated, checkpointed and dumped.
//
// No rank waits for another without a bound (--stall-timeout): the members of a group meet in a
// dist::StepArrival each local step (it names a member that does not come), all ranks meet in one at the
// validation points and at the end, every rank watches every rank's local steps in the shared counter (the
// lowest rank that is not stalled names the stalled ones: train/elastic_watch.hpp), and a watchdog thread
// ends a rank whose own step blocks for too long.
//
// The group itself is train/elastic_group.hpp, what rank 0 prints and writes train/elastic_report.hpp, its
// mid-run checkpoints of the center train/elastic_checkpoint.hpp; the per-step plumbing is the one every
// mode shares (train/shared_step.hpp), the loop around the steps too (train/loop.hpp).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/train.hpp"
#include "ops/scale/scale.hpp"
#include "train/elastic_checkpoint.hpp"
#include "train/elastic_group.hpp"
#include "train/elastic_report.hpp"
#include "train/elastic_trade.hpp"
#include "train/elastic_watch.hpp"
#include "train/local_step.hpp"
#include "train/loop.hpp"
#include "train/running_stats.hpp"
#include "train/shares.hpp"
#include "train/stop_signals.hpp"

namespace hetrain::train {
namespace {

int64_t micros(double seconds) { return int64_t(std::llround(seconds * 1e6)); }

// This rank's samples per local step: --local-batch, else an equal share of B, within the GPU's memory.
int64_t local_batch_of(const TrainConfig& cfg, const Setup& s, int ranks) {
  int64_t b = cfg.local_batch > 0 ? cfg.local_batch : std::max<int64_t>(1, cfg.global_batch / ranks);
  if (s.memory_cap > 0) b = std::min(b, s.memory_cap);
  return b;
}

int64_t total_samples_of(const TrainConfig& cfg, const Setup& s) {
  const int64_t n = s.train->info().num_samples;
  return cfg.max_steps > 0 ? std::min(cfg.max_steps * cfg.step_batch(), n * cfg.epochs) : n * cfg.epochs;
}

class ElasticMode final : public TrainingMode {
 public:
  explicit ElasticMode(TrainingRun& run)
      : run_(run),
        cfg_(run.cfg),
        world_(run.world),
        s_(run.s),
        outputs_(run.outputs),
        checkpointer_(run.checkpointer),
        local_step_(s_, cfg_.label_smoothing),
        local_batch_(local_batch_of(cfg_, s_, world_.size())),
        group_(cfg_, s_, world_, local_step_, local_batch_),
        total_samples_(total_samples_of(cfg_, s_)),
        report_(cfg_, s_, world_, group_, total_samples_),
        watch_(cfg_.stall_timeout, world_.rank(), group_.leaders(), s_.hosts),
        trade_(cfg_.elastic_alpha),
        center_checkpoints_(cfg_, s_, checkpointer_, total_samples_) {}

  void announce() override {
    all_batches_.resize(size_t(world_.size()));
    HT_MPI_CHECK(MPI_Allgather(&local_batch_, 1, MPI_INT64_T, all_batches_.data(), 1, MPI_INT64_T, world_.comm()));
    report_.announce(all_batches_);
  }

  void begin() override {
    nn::ParamBuffer& params = s_.model->params();
    first_sample_ = position_ = std::min(s_.start_sample, total_samples_);
    Tensor host = params.values().to(Device::CPU);  // the center starts as the (identical) replicas
    // Window creation fails alike everywhere (no usable one-sided component): one line from rank 0.
    dist::agree_on(world_.comm(), [&] {
      center_ = std::make_unique<dist::ElasticCenter>(world_.comm(), params.count(), host.data(), s_.wire,
                                                      cfg_.stall_timeout);
    });
    dist::agree_on(world_.comm(), [&] { counter_ = std::make_unique<dist::SampleCounter>(world_.comm(), first_sample_); });
    pushes_averaged_ = counter_->updates();
    // Other ranks' reads and pushes aimed at this one progress while it computes: MPI is polled between layers.
    progress_.emplace(world_.comm());
    poll_between_layers_.emplace(&dist::RmaProgress::poll);
    if (on_gpu()) poll_while_gpu_works_.emplace(&dist::RmaProgress::poll);  // e.g. its step's last work
    report_.start(first_sample_, counter_->stats());
    watch_.restart();
  }

  // Two calls per claim: the first claims the group's next samples (the loop then validates at the points
  // the claim shows to be passed: every rank reaches the same points in the same order), the second trains
  // them.
  StepEnd step(TrainResult&) override {
    StepEnd end;
    end.position_before = position_;
    if (!pending_) {
      // Bounds this local step, its one-sided operations included: a rank blocked in it for 2x
      // --stall-timeout (and a grace period) ends itself with one line.
      s_.arrival->watch(local_steps_);
      const Claim claim = next_claim();
      // The stop position is the same for every rank; exhaustion passes every point but the end's.
      position_ = std::min(claim.n == 0 ? total_samples_ : claim.first, total_samples_ - 1);
      end.position = position_;
      end.finished = claim.n == 0;
      end.stop_signal = stopped_ = claim.n < 0;
      if (claim.n > 0) pending_ = claim;
      return end;
    }
    const Claim claim = *pending_;
    pending_.reset();
    const LocalOutcome local = train_local_step(claim.first, claim.n);
    const bool updates = micro_ == cfg_.accumulate;
    if (updates) update(claim.first);
    group_.rebalance(local_steps_, cfg_.quiet);
    ++local_steps_;
    trained_samples_ += last_b_;
    last_step_samples_ = last_b_;
    report_.add_step(local.loss_sum, local.correct, last_b_, step_rates(s_, current_step(claim.first)).lr);
    if (updates && updates_ % cfg_.elastic_every == 0) trade_with_center();
    if (world_.rank() == 0) {
      average_center();
      report_.report(claim.first + claim.n, local_steps_, *counter_, outputs_);
      center_checkpoints_.maybe_write(claim.first + claim.n, *center_, *counter_, all_batches_);
    }
    watch_.poll(*counter_);
    end.position = position_;
    return end;
  }

  int64_t validation_every() const override {  // default: a validation each epoch
    return cfg_.val_every_samples > 0 ? cfg_.val_every_samples : s_.train->info().num_samples;
  }

  // The center evaluated at a validation point, every rank's own replica kept aside meanwhile.
  EvalTotals evaluate(int64_t point) override {
    // Every rank comes here; one that does not within --stall-timeout is named.
    std::vector<double> none = {0.0};
    s_.arrival->arrive(point / cfg_.step_batch(), none);
    s_.arrival->step_done();  // the evaluation takes as long as it takes (as in sync mode)
    nn::ParamBuffer& params = s_.model->params();
    const Tensor values = params.values().clone(), states = params.states().clone();  // this rank's own
    if (s_.ema) {
      load_average();
    } else {
      Tensor host = params.values().to(Device::CPU);
      center_->read(host.data());
      if (on_gpu()) params.values().copy_from(host);  // on the CPU, host is the parameters themselves
    }
    sync_running_stats();
    const EvalTotals e = validate(s_, world_.comm());
    params.values().copy_from(values);
    params.states().copy_from(states);
    report_.validated(e.loss_sum / std::max(1.0, e.count), e.headline());
    s_.arrival->watch(local_steps_);
    watch_.restart();  // nobody stepped while everyone validated
    return e;
  }

  void average_running_stats() override { sync_running_stats(); }

  // After end() the model is the center; with --ema-decay its moving average is what is validated.
  EvalTotals evaluate_final(TrainingRun&) override {
    if (!s_.ema) return validate(s_, world_.comm());
    nn::ParamBuffer& params = s_.model->params();
    const Tensor center = params.values().clone();
    load_average();
    const EvalTotals e = validate(s_, world_.comm());
    params.values().copy_from(center);
    return e;
  }

  // After the local steps, on every rank: the group's last trade, the center made every rank's model, the
  // rate over all ranks.
  RunEnd end(TrainResult& result) override {
    // A partial accumulation is applied, and the group's updates since its last trade go into the center.
    if (micro_ > 0) update(last_first_);
    if (updates_ % cfg_.elastic_every != 0) trade_with_center();
    publish_step(/*finished=*/true);
    const double train_seconds = run_.training_seconds();

    // Every rank is done pushing: the center is the model, on every rank alike. A rank that never gets
    // here is named (--stall-timeout).
    std::vector<double> none = {0.0};
    s_.arrival->arrive(total_samples_ / cfg_.step_batch(), none);
    s_.arrival->step_done();
    samples_done_ = std::min(counter_->claimed(), total_samples_);
    // Nobody closes the counter while another still reads it; ranks still pushing are served meanwhile.
    MPI_Request barrier;
    HT_MPI_CHECK(MPI_Ibarrier(world_.comm(), &barrier));
    dist::wait_serving(&barrier);
    nn::ParamBuffer& params = s_.model->params();
    Tensor host = params.values().to(Device::CPU);
    center_->read(host.data());
    if (on_gpu()) params.values().copy_from(host);  // on the CPU, host is the parameters themselves
    if (world_.rank() == 0) average_center();  // the last pushes
    center_open_ = false;
    poll_between_layers_.reset();
    poll_while_gpu_works_.reset();
    progress_->close();
    counter_->close();
    center_->close();
    sync_running_stats();

    result.steps = samples_done_ / cfg_.step_batch();
    result.final_loss = report_.final_loss();
    double all[2] = {double(trained_samples_), train_seconds};
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all[0], 1, MPI_DOUBLE, MPI_SUM, world_.comm()));
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &all[1], 1, MPI_DOUBLE, MPI_MAX, world_.comm()));
    result.samples_per_second = all[1] > 0 ? all[0] / all[1] : 0;
    RunEnd end;
    end.final_validation_at = samples_done_;
    end.train_seconds = train_seconds;
    // Resumed at the end: the checkpoint it came from already holds this position.
    end.checkpoint_due = checkpointer_.enabled() && !nothing_left();
    return end;
  }

  void summary(const TrainResult& result) override {
    report_.summary(result, stopped_, nothing_left(), samples_done_, trade_.traffic(), checkpointer_.enabled());
  }

  void close() override {
    if (group_.arrival()) group_.arrival()->close();
  }

 private:
  bool on_gpu() const { return s_.device_kind == Device::CUDA; }

  // Any rank's stop signal stops the counter; the group's leader claims its next samples.
  Claim next_claim() {
    if (stop_requests() > 0 && !stop_sent_) counter_->request_stop(), stop_sent_ = true;
    double idle = 0;
    const Claim claim =
        group_.claim(*counter_, total_samples_, checkpointer_.enabled(), unpushed_, local_steps_, idle);
    step_stats_.idle_us += micros(idle);
    return claim;
  }

  // One local step of this rank inside its group's claim [first, first + n): its share's forward and
  // backward. With --accumulate N the gradients of N claims add up before update() (docs/architecture.md,
  // "Gradient accumulation").
  LocalOutcome train_local_step(int64_t first, int64_t n) {
    const Share share = member_share(group_.member_batches(), group_.rank(), n);
    const int64_t b = share.count;
    const StepInput in = take_batch(first, share);
    // fp16 ranks scale their loss (train/loss_scale.hpp); --debug-overflow-at makes the gradient NaN/Inf.
    const BackwardScale scale = backward_scale(s_, world_.rank(), local_steps_);
    rank_scale_ = scale.rank_scale;
    set_batch_norm_step(s_, b, double(b) / double(n) / scale.rank_scale);
    // Accumulating, each claim's gradient is weighted here by this member's share of it and by 1/N, so that
    // the group's plain sum at the update is the mean over its N claims; otherwise the reduction weights it.
    const bool accumulating = cfg_.accumulate > 1;
    const float share_scale = accumulating ? float(double(b) / double(n) / double(cfg_.accumulate)) : 1.0f;
    if (micro_ == 0) remember_running_stats(s_);  // the update these claims end in may be skipped
    ComputeClock clock;
    const LocalOutcome local =
        local_step_.run(in.batch, in.uploaded, b, {}, {}, scale.loss_scale * share_scale, accumulating && micro_ > 0);
    // Emulated speed changes (--emulate-schedule) happen at the same global step in every mode.
    const double compute = clock.stop(s_, world_.rank(), first / cfg_.step_batch(), local_steps_ == 0);
    if (group_.balancer() && !clock.setup()) group_.balancer()->record(b, compute);
    report_.add_compute(compute);
    step_stats_.compute_us += micros(compute);
    step_stats_.samples += b;
    step_stats_.steps += 1;
    // Published once computed, before the group's reduction: a member that stops while computing is then
    // one step behind the members that wait for it (the stall watch names the one behind).
    publish_step();
    ++micro_;
    last_b_ = b;
    last_n_ = n;
    last_first_ = first;
    return local;
  }

  int64_t current_step(int64_t first) const { return std::min(first / cfg_.step_batch(), s_.total_steps - 1); }

  // The group's reduction and the update that end micro_ claims (the last of them starting at `first`): all
  // N of --accumulate, or fewer at the end of the run (their gradients then count as much as N would).
  void update(int64_t first) {
    const bool accumulating = cfg_.accumulate > 1;
    if (accumulating && micro_ < cfg_.accumulate)
      ops::scale(s_.model->params().grads(), float(double(cfg_.accumulate) / double(micro_)));
    // Accumulated claims carry their shares already: the group adds them up.
    if (accumulating)
      reduce_in_group(1, 1, rank_scale_);
    else
      reduce_in_group(last_b_, last_n_, rank_scale_);
    const bool skipped = overflowed();  // its samples count as trained, as in the synchronous mode
    // The learning rate follows the samples consumed by all groups, in steps of the global batch (times N).
    const optim::StepRates rates = step_rates(s_, current_step(first));
    // The members of a group stay identical replicas.
    apply_update(s_, rates, skipped, cfg_.debug_consistency && group_.size() > 1, group_.comm(),
                 "parameters within a hybrid group");
    micro_ = 0;
    ++updates_;
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
    s_.train->submit(std::move(indices), s_.augment, augmentation_seed(cfg_.seed, epoch),
                     on_gpu() ? data::BatchForm::Raw : data::BatchForm::Float);
    StepInput in;
    in.batch = s_.train->next();
    if (on_gpu()) in.uploaded = s_.input->upload(in.batch);
    const double wait = seconds_since(start);
    report_.add_wait(wait);
    step_stats_.wait_us += micros(wait);
    check_injected_failure(s_, world_.rank(), local_steps_, "local step");
    return in;
  }

  // The group's gradient, weighted by each member's share of the claim of n samples; a rank alone only
  // takes its loss scale back out.
  void reduce_in_group(int64_t b, int64_t n, double rank_scale) {
    nn::ParamBuffer& params = s_.model->params();
    if (dist::Communicator* reduction = group_.reduction()) {
      auto comm_start = Clock::now();
      // The members meet first, bounded: one stopped in its forward or backward pass is named here ("did
      // not arrive at the group's gradient reduction") rather than left unnamed inside the reduction; one
      // that stops inside the reduction falls silent there and is named as such (the reduction's waits
      // send the others' signs of life: ElasticGroup).
      std::vector<double> none = {0.0};
      group_.arrival()->arrive(local_steps_, none, "the group's gradient reduction");
      reduction->weighted_allreduce(params.grads().data(), params.count(), double(b) / double(n) / rank_scale,
                                    s_.wire);
      group_.arrival()->step_done();
      const double comm = seconds_since(comm_start);
      report_.add_comm(comm);
      step_stats_.comm_us += micros(comm);
    } else if (rank_scale != 1.0) {
      ops::scale(params.grads(), float(1.0 / rank_scale));  // a power of two: exact
    }
  }

  // Every update's gradient is checked, in every precision (invariant 8, docs/architecture.md "Failures"):
  // fp16 skips a step whose gradient has NaN/Inf values and halves the scale; otherwise (or when the scale
  // is spent) the job stops, naming this rank or group and where it was. The members of a hybrid group
  // reduced to the same gradient, so they all decide alike without asking each other.
  bool overflowed() {
    const int64_t nonfinite = count_nonfinite(s_.model->params().grads());
    const bool grouped = group_.size() > 1;
    const std::string where = (grouped ? "group " + std::to_string(group_.number(group_.leader()))
                                       : "rank " + std::to_string(world_.rank())) +
                              ", local step " + std::to_string(local_steps_) + " (" + mode_name(s_.mode) +
                              " mode, sample " + std::to_string(last_first_) + " of the run)";
    if (!skip_for_overflow(s_.loss_scaler, nonfinite, where, /*agreed=*/false, group_.leads() && !cfg_.quiet,
                           grouped ? "the group's reduced gradient" : "its local gradient"))
      return false;
    step_stats_.skipped += 1;
    return true;
  }

  // The group leader's elastic exchange with the center, then the group takes the leader's weights.
  void trade_with_center() {
    const double comm = trade_.trade(s_.model->params(), on_gpu(), group_, *center_, *counter_, step_stats_, unpushed_,
                                     world_.rank(), local_steps_);
    report_.add_comm(comm);
    step_stats_.comm_us += micros(comm);
  }

  // This rank's row in the shared counter: what its last local step did (and whether it has finished).
  void publish_step(bool finished = false) {
    step_stats_.finished = finished ? 1 : 0;
    // Memory travels as levels: the row sums this rank's changes, so it holds the latest figures.
    const MemoryFigures m = memory_figures();
    const int64_t levels[4] = {mib_to_bytes(m.host_mib), mib_to_bytes(m.host_peak_mib), mib_to_bytes(m.device_mib),
                               mib_to_bytes(m.device_peak_mib)};
    int64_t* deltas[4] = {&step_stats_.host_bytes, &step_stats_.host_peak_bytes, &step_stats_.device_bytes,
                          &step_stats_.device_peak_bytes};
    for (int i = 0; i < 4; ++i) *deltas[i] = levels[i] - published_memory_[i], published_memory_[i] = levels[i];
    counter_->add_stats(world_.rank(), step_stats_);
    step_stats_ = dist::SampleCounter::RankStats{};
  }
  static int64_t mib_to_bytes(double mib) { return int64_t(mib * 1024.0 * 1024.0 + 0.5); }

  // Batch-norm running statistics: every rank saw its own samples; one set by the rule of every mode
  // (train/running_stats.hpp), each rank weighted by the samples of its last local step.
  void sync_running_stats() {
    train::average_running_stats(*s_.comm, world_.comm(), s_.model->params(), last_step_samples_, cfg_.debug_consistency);
  }

  bool nothing_left() const { return first_sample_ >= total_samples_; }

  // Collective, --ema-decay: the center's moving average (rank 0's, brought up to date) in the model's values.
  void load_average() {
    nn::ParamBuffer& params = s_.model->params();
    Tensor host = params.values().to(Device::CPU);  // on the CPU, the parameters themselves
    if (world_.rank() == 0) {
      average_center();
      host.copy_from(s_.ema->values());
    }
    HT_MPI_CHECK(MPI_Bcast(host.data(), int(host.numel()), MPI_FLOAT, 0, world_.comm()));
    if (on_gpu()) params.values().copy_from(host);
  }

  // --ema-decay, rank 0: the moving average of the center, one update per push into it by any group
  // (docs/detection.md, "Training recipe"). Rank 0 reads the center when pushes came since it last did;
  // k of them step the average k times towards what it reads.
  void average_center() {
    if (!s_.ema || !center_open_) return;  // after end(), the average holds every push
    const int64_t pushes = counter_->updates();
    if (pushes <= pushes_averaged_) return;
    if (center_copy_.numel() != center_->count()) center_copy_ = Tensor({center_->count()});
    center_->read(center_copy_.data());
    s_.ema->update_towards(center_copy_, pushes - pushes_averaged_);
    pushes_averaged_ = pushes;
  }

  void save_checkpoint() override {
    // Named by the step of the global batch it falls in; a resume continues at the exact sample.
    const int64_t samples_done = samples_done_;
    CheckpointInfo info = checkpoint_info(cfg_, s_, samples_done / cfg_.step_batch(), world_.size());
    info.sample_position = samples_done;
    info.split = all_batches_;
    // The average's statistics are the model's, made one set at the end (the center has none of its own).
    if (s_.ema) s_.ema->states().copy_from(s_.model->params().states());
    checkpointer_.write(info, s_.model->params(), *s_.sgd, *s_.arrival, total_samples_ / cfg_.step_batch(),
                        s_.ema.get());
  }

  TrainingRun& run_;
  const TrainConfig& cfg_;
  dist::World& world_;
  Setup& s_;
  Outputs& outputs_;
  Checkpointer& checkpointer_;
  LocalStep local_step_;
  int64_t local_batch_;               // this rank's samples per local step
  ElasticGroup group_;
  int64_t total_samples_;             // of the whole run: epochs x N, or --max-steps x B
  ElasticReport report_;
  HeartbeatWatch watch_;
  std::vector<int64_t> all_batches_;  // every rank's local batch
  dist::SampleCounter::RankStats step_stats_;  // this rank's last local step, published after it
  int64_t published_memory_[4] = {0, 0, 0, 0};  // the memory levels this rank's row holds (publish_step)
  bool unpushed_ = false;             // group leaders: a claim not yet pushed into the center
  std::unique_ptr<dist::ElasticCenter> center_;  // the model every group trades with
  std::unique_ptr<dist::SampleCounter> counter_;  // the run's samples handed out, every rank's step row
  std::optional<dist::RmaProgress> progress_;
  std::optional<BetweenLayersHook> poll_between_layers_;  // while training
  std::optional<DeviceWaitHook> poll_while_gpu_works_;    // while training, on a GPU rank
  bool stop_sent_ = false, stopped_ = false;
  std::optional<Claim> pending_;          // claimed, trained at the next step()
  int64_t first_sample_ = 0, position_ = 0, samples_done_ = 0;
  int64_t local_steps_ = 0, trained_samples_ = 0;
  int64_t micro_ = 0;        // claims trained since the last update (--accumulate: up to N)
  int64_t pushes_averaged_ = 0;  // rank 0 with --ema-decay: the center's pushes its average has taken in
  Tensor center_copy_;           // ... and where it reads the center
  bool center_open_ = true;      // until end() closes the center and the counter
  int64_t updates_ = 0;      // this rank's updates (every --elastic-every of them, its group trades)
  int64_t last_b_ = 0, last_n_ = 0, last_first_ = 0;  // the last claim: this member's share, its size, its start
  double rank_scale_ = 1.0;  // the last claim's loss-scale factor to take back out of the gradient
  int64_t last_step_samples_ = 0;  // this rank's samples in its last local step (the weight of its BN statistics)
  CenterTrade trade_;
  CenterCheckpoints center_checkpoints_;
};

}  // namespace

std::unique_ptr<TrainingMode> make_elastic_mode(TrainingRun& run) { return std::make_unique<ElasticMode>(run); }

}  // namespace hetrain::train
