// The synchronous training loop (docs/architecture.md, "One synchronous step").
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/ops.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/threading.hpp"
#include "hetrain/train.hpp"
#include "ops/conv2d/conv2d.hpp"
#include "train/batch_source.hpp"
#include "train/checkpointer.hpp"
#include "train/evaluate.hpp"
#include "train/local_step.hpp"
#include "train/outputs.hpp"
#include "train/report.hpp"
#include "train/setup.hpp"
#include "train/stop_signals.hpp"

namespace hetrain::train {
namespace {

// Sets the hook called between layers (nn::set_between_layers_hook) for its lifetime.
struct BetweenLayers {
  explicit BetweenLayers(std::function<void()> hook) { nn::set_between_layers_hook(std::move(hook)); }
  ~BetweenLayers() { nn::set_between_layers_hook(nullptr); }
  BetweenLayers(const BetweenLayers&) = delete;
  BetweenLayers& operator=(const BetweenLayers&) = delete;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The work of one step as planned when its batch was requested: later rebalances do not change it.
struct PlannedStep {
  int64_t epoch, step_in_epoch, global_step;
  int64_t global_batch;          // B of this step (smaller for a partial last batch)
  std::vector<int64_t> split;    // b_r of every rank, Σ = global_batch
  std::vector<int64_t> indices;  // this rank's samples (kept for --dump-samples, logged when trained on)
  int64_t local_batch() const { return split[dist::World::get().rank()]; }
};

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

class Trainer {
 public:
  explicit Trainer(const TrainConfig& cfg)
      : cfg_(cfg),
        world_(dist::World::get()),
        s_(make_setup(cfg, world_)),
        outputs_(cfg, world_),
        checkpointer_(cfg, world_, s_.prunable_checkpoints),
        local_step_(s_, cfg.label_smoothing),
        next_step_(s_.start_step),
        any_gpu_(any_rank(on_gpu())),
        min_share_(s_.model->params().state_count() > 0 ? 2 : 1) {
    // A rank waiting in the gradient reduction tells the stall watch it is alive, so one that stopped
    // there is named (dist/arrival.hpp).
    s_.comm->set_idle_hook([this] { s_.arrival->keep_alive(); });
  }

  TrainResult run() {
    announce();
    // Started buckets advance between layers: MPI moves a reduction only inside MPI calls.
    BetweenLayers progress(s_.buckets && s_.comm->overlaps() ? std::function<void()>([this] { s_.buckets->progress(); })
                                                              : std::function<void()>());
    run_start_ = Clock::now();
    TrainResult result;
    result.steps = s_.start_step;
    Totals window;  // since the last progress line
    double timed_seconds = 0, timed_exposed = 0;
    int64_t timed_samples = 0;
    fill_queue();
    while (!queue_.empty()) {
      PlannedStep plan = queue_.front();
      queue_.pop_front();
      StepFlags flags;
      StepRecord rec = train_step(plan, window, flags);
      if (flags.output_failed > 0) outputs_.fail_agreed();
      const bool stop_signal = flags.stop > 0;
      const bool stop_here = cfg_.stop_at_step > 0 && plan.global_step + 1 >= cfg_.stop_at_step;
      if (!stop_signal && !stop_here) {  // request what comes next before logging, so reading overlaps
        if (split_changed_) replan_queued_steps();
        fill_queue();
      }
      if (plan.global_step > s_.start_step) {  // the first step pays one-off costs (allocation, page faults)
        timed_seconds += rec.step_seconds;
        timed_samples += plan.global_batch;
        if (world_.rank() == 0) timed_exposed += rec.exposed_share() * rec.step_seconds;
      }
      if (world_.rank() == 0) report_step(rec, window, result, stop_signal || stop_here);
      result.steps = plan.global_step + 1;
      if (result.steps % s_.plan->steps_per_epoch() == 0 || result.steps == s_.total_steps)
        end_epoch(plan.epoch, result, rec);
      else
        validate_at_points(plan);
      outputs_.write_metrics(rec);  // rank 0; after the epoch's validation, which the last line carries
      // Without --checkpoint-dir a stop writes nothing (no file lands in the working folder).
      if ((checkpointer_.enabled() && (stop_signal || stop_here)) || checkpointer_.due_by_steps(result.steps) ||
          flags.checkpoint_due > 0)
        save_checkpoint(result.steps);
      if (stop_signal || stop_here) {
        result.stopped_by_signal = stop_signal;
        if (world_.rank() == 0) {  // even with --quiet: the run did not finish
          std::printf("stopped after step %lld of %lld (%s)%s\n", (long long)result.steps, (long long)s_.total_steps,
                      stop_signal ? "stop signal" : "--stop-at-step",
                      checkpointer_.enabled() ? "; continue with --resume auto" : "");
          std::fflush(stdout);
        }
        break;
      }
    }
    if (checkpointer_.enabled() && checkpointer_.last_step() != result.steps && result.steps > s_.start_step)
      save_checkpoint(result.steps);  // always one at the end of training
    result.samples_per_second = timed_seconds > 0 ? timed_samples / timed_seconds : 0;
    if (world_.rank() == 0 && !cfg_.quiet && world_.size() > 1 && timed_seconds > 0)
      std::printf("gradients: reduction exposed %.1f%% of step time (the rank that waited longest, after the first "
                  "step)\n", 100.0 * timed_exposed / timed_seconds);
    if (world_.rank() == 0 && !cfg_.quiet && s_.loss_scaler.active())
      std::printf("fp16: %lld step(s) skipped for overflow, loss scale %g\n", (long long)s_.loss_scaler.skipped(),
                  s_.loss_scaler.scale());
    if (world_.rank() == 0 && !cfg_.quiet && result.steps == s_.start_step)  // resumed at the end: no rate, no loss
      std::printf("done: nothing left to train, the run was already at step %lld of %lld\n",
                  (long long)result.steps, (long long)s_.total_steps);
    else if (world_.rank() == 0 && !cfg_.quiet)
      std::printf("done: %lld steps, %.1f samples/s (after the first step), final train loss %.4f%s\n",
                  (long long)result.steps, result.samples_per_second, result.final_loss,
                  val_text(result.val_accuracy).c_str());
    // Every rank learns whether the outputs were written before anyone finalizes.
    outputs_.finish(s_.model->params());
    s_.arrival->close();
    return result;
  }

 private:
  // A progress line's training accuracy, "  acc  91.20%"; nothing for a detector (it is scored by mAP).
  std::string accuracy_text(double accuracy) const {
    if (s_.detection) return "";
    char text[24];
    std::snprintf(text, sizeof text, "  acc %6.2f%%", 100.0 * accuracy);
    return text;
  }
  // The run's last line: ", val accuracy 91.20%", ", val mAP@0.5 0.5120" for a detector, "" without validation.
  std::string val_text(double headline) const {
    if (headline < 0) return "";
    if (s_.detection) {
      char text[48];
      std::snprintf(text, sizeof text, ", val mAP@0.5 %.4f", headline);
      return text;
    }
    return ", val accuracy " + pct(headline);
  }
  static std::string pct(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * x);
    return buf;
  }

  void announce() {
    const std::string table = world_.rank_table(s_.device);
    if (world_.rank() != 0) return;
    print_notes(s_.notes);
    std::fflush(stdout);
    if (cfg_.quiet) return;
    const auto& info = s_.train->info();
    std::printf("hetrain: %d rank(s)\n%s", world_.size(), table.c_str());
    std::printf("data: %s — %lld samples, %dx%dx%d, %d classes%s\n", info.path.c_str(),
                (long long)info.num_samples, info.channels, info.height, info.width, info.num_classes,
                s_.val ? (", validation " + std::to_string(s_.val->info().num_samples) + " samples").c_str() : "");
    std::printf("model: %s, %lld parameters; global batch %lld, %lld steps/epoch, %d epoch(s), peak lr %.4g\n",
                cfg_.model.c_str(), (long long)s_.model->param_count(), (long long)cfg_.global_batch,
                (long long)s_.plan->steps_per_epoch(), cfg_.epochs, s_.schedule->peak_lr());
    std::printf("gradients: %s reduction, %s\n", s_.comm->name(), buckets_text().c_str());
    if (cfg_.precision != Precision::FP32) std::printf("%s\n", precision_text(cfg_.precision).c_str());
    if (checkpointer_.enabled())
      std::printf("checkpoints: %s, every %s, newest %d kept\n", cfg_.checkpoint_dir.c_str(), checkpoint_interval().c_str(),
                  cfg_.keep_checkpoints);
    if (s_.start_step > 0)
      std::printf("resuming at step %lld of %lld (epoch %lld)\n", (long long)s_.start_step, (long long)s_.total_steps,
                  (long long)(s_.start_step / s_.plan->steps_per_epoch() + 1));
    if (s_.emulator.active()) std::printf("%s\n", s_.emulator.describe().c_str());
    if (!s_.fixed_split.empty())
      std::printf("balance: fixed split %s\n", join(s_.fixed_split).c_str());
    else
      std::printf("balance: %s, initial split %s\n", dist::balance_mode_name(s_.balancer->planner().config().mode),
                  join(s_.balancer->split()).c_str());
    std::fflush(stdout);
  }

  std::string buckets_text() const {
    if (!s_.buckets) return "one after backward (--bucket-mb 0)";
    char buf[160];
    std::snprintf(buf, sizeof buf, "%zu bucket(s) of about %g MiB %s", s_.buckets->buckets().size(), cfg_.bucket_mb,
                  s_.comm->overlaps() ? "started during backward" : "reduced after backward (this backend does not overlap)");
    return buf;
  }

  std::string checkpoint_interval() const {
    std::string out;
    if (cfg_.checkpoint_every > 0) out = std::to_string(cfg_.checkpoint_every) + " steps";
    if (cfg_.checkpoint_minutes > 0) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%s%g minutes", out.empty() ? "" : " and ", cfg_.checkpoint_minutes);
      out += buf;
    }
    return (out.empty() ? "never" : out) + " and at the end";
  }

  static std::string join(const std::vector<int64_t>& v) {
    std::ostringstream os;
    os << '[';
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << ']';
    return os.str();
  }

  // The split every rank uses for a step of `batch` samples: the balancer's (or the fixed) split, scaled
  // down by largest remainder for a partial last batch.
  // The split of a step of `batch` samples. The balancer's splits give a rank of a model with batch norm
  // no samples or at least two (dist::respect_min_share); a fixed --split is the user's.
  std::vector<int64_t> split_for(int64_t batch) const {
    if (s_.fixed_split.empty()) return dist::respect_min_share(scaled_split(batch), min_share_);
    return scaled_split(batch);
  }

  std::vector<int64_t> scaled_split(int64_t batch) const {
    const std::vector<int64_t>& full = s_.fixed_split.empty() ? s_.balancer->split() : s_.fixed_split;
    if (batch == cfg_.global_batch) return full;
    std::vector<int64_t> out(full.size());
    std::vector<std::pair<double, size_t>> rest;
    int64_t given = 0;
    for (size_t r = 0; r < full.size(); ++r) {
      double exact = double(full[r]) * batch / cfg_.global_batch;
      out[r] = static_cast<int64_t>(std::floor(exact));
      given += out[r];
      rest.push_back({-(exact - out[r]), r});
    }
    std::sort(rest.begin(), rest.end());
    for (size_t i = 0; given < batch; ++i, ++given) out[rest[i % rest.size()].second] += 1;
    return out;
  }

  // Requests batches up to prefetch_depth steps ahead, each with the split in force when it is requested.
  void fill_queue() {
    const int64_t steps_per_epoch = s_.plan->steps_per_epoch();
    // --stop-at-step ends the run early without changing its schedule: nothing past it is requested.
    const int64_t total = cfg_.stop_at_step > 0 ? std::min(s_.total_steps, cfg_.stop_at_step) : s_.total_steps;
    while (int64_t(queue_.size()) < std::max(1, cfg_.prefetch_depth) && next_step_ < total) {
      PlannedStep p;
      p.global_step = next_step_++;
      p.epoch = p.global_step / steps_per_epoch;
      p.step_in_epoch = p.global_step % steps_per_epoch;
      // Resumed inside a step (an asynchronous run stopped there): the first step trains the rest of it.
      const int64_t skip = p.global_step == s_.start_step ? s_.start_skip : 0;
      p.global_batch = s_.plan->batch_size(p.step_in_epoch) - skip;
      p.split = split_for(p.global_batch);
      int64_t offset = skip;
      for (int r = 0; r < world_.rank(); ++r) offset += p.split[r];
      auto indices = s_.plan->slice(p.epoch, p.step_in_epoch, offset, p.local_batch());
      if (outputs_.logs_samples()) p.indices = indices;
      const uint64_t aug_seed = cfg_.seed * 0x9e3779b97f4a7c15ull + uint64_t(p.epoch) * 1000003ull;  // + sample index: same draw on any rank
      s_.train->submit(std::move(indices), cfg_.augment, aug_seed, batch_form());
      queue_.push_back(std::move(p));
    }
  }

  // After the split changed, the steps already requested still carry the old one; the first of them runs
  // at it, and on a straggler's first step that costs most of a step. A job of CPU ranks only reads those
  // batches again with the new split (one batch's read, against a step at the old split). A GPU rank has
  // the next batch uploaded already, so jobs with GPUs keep the requested steps as they are. Every rank
  // decides alike (any_gpu_ and the new split are the same everywhere), so the sample slices agree.
  void replan_queued_steps() {
    split_changed_ = false;
    if (any_gpu_ || queue_.empty()) return;
    bool stale = false;
    for (const PlannedStep& p : queue_) stale = stale || p.split != split_for(p.global_batch);
    if (!stale) return;
    for (size_t i = 0; i < queue_.size(); ++i) (void)s_.train->next();  // requested in this order; dropped
    next_step_ = queue_.front().global_step;
    queue_.clear();
  }

  bool any_rank(bool mine) const {
    int v = mine ? 1 : 0;
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, world_.comm()));
    return v != 0;
  }

  bool on_gpu() const { return s_.device_kind == Device::CUDA; }
  // GPU ranks take uint8 batches and augment on the device (train/device_step.hpp).
  data::BatchForm batch_form() const { return on_gpu() ? data::BatchForm::Raw : data::BatchForm::Float; }

  StepRecord train_step(const PlannedStep& plan, Totals& window, StepFlags& flags) {
    auto step_start = Clock::now();
    data::Batch batch;
    DeviceInput::Uploaded input;
    if (staged_) {  // GPU: uploaded during the previous step
      input = *staged_;
      staged_.reset();
    } else {
      batch = s_.train->next();
      if (on_gpu()) input = s_.input->upload(batch);
    }
    StepTimes mine;
    mine.wait = seconds_since(step_start);
    const int64_t b = plan.local_batch();
    HT_CHECK(!(world_.rank() == s_.fail_rank && plan.global_step == s_.fail_step),
             "failure injected by --debug-fail-at at step ", plan.global_step);
    const int64_t got = on_gpu() ? input.n : int64_t(batch.labels.size());
    HT_CHECK(got == b, "internal: batch of ", got, " samples for a share of ", b);

    auto compute_start = Clock::now();
    const double cpu_start = dist::SpeedEmulator::thread_cpu_seconds();
    nn::ParamBuffer& params = s_.model->params();
    // An FP16 rank backpropagates its loss times the scale and divides it out in its reduction weight; the
    // other ranks' gradients are unscaled. --debug-overflow-at makes one rank's gradient NaN/Inf instead.
    const double rank_scale = s_.precision == Precision::FP16 ? s_.loss_scaler.scale() : 1.0;
    const bool inject_overflow = world_.rank() == s_.overflow_rank && plan.global_step == s_.overflow_step;
    const float loss_scale = inject_overflow ? std::numeric_limits<float>::infinity() : float(rank_scale);
    const double weight = double(b) / double(plan.global_batch) / rank_scale;
    if (s_.buckets) s_.buckets->begin(params.grads().data(), weight);
    double next_wait = 0;
    const int64_t kernels_before = ops::conv2d_kernels_made();
    // On a GPU, while this step computes there, the next step's batch (requested long ago) is taken from
    // the reader and uploaded into the other slot; the wait for it counts as data wait, not compute.
    const LocalOutcome local = local_step_.run(batch, input, b, [&] {
      if (queue_.empty()) return;
      auto wait_start = Clock::now();
      data::Batch next = s_.train->next();
      next_wait += seconds_since(wait_start);
      staged_ = s_.input->upload(next);
    }, grads_final_hook(), loss_scale);
    // Every rank starts every bucket before the agreement, also a rank with b_r = 0 (it ran no backward).
    auto exposed_start = Clock::now();
    if (s_.buckets) s_.buckets->start_rest();
    mine.exposed = seconds_since(exposed_start);
    const double loss_sum = local.loss_sum, correct = local.correct;
    // A step that made kernels for a new batch size (JIT, cuDNN's search) is no sample of this rank's speed.
    const bool timing_is_typical = ops::conv2d_kernels_made() == kernels_before;
    mine.compute = seconds_since(compute_start) - next_wait;
    mine.wait += next_wait;
    // The balancer counts the steps of this process: a resumed run calibrates again (its ranks, their
    // devices and their load may have changed). Its first step, and a step that made kernels, are set-up:
    // neither emulated nor a sample of the rank's speed.
    const int64_t local_step = plan.global_step - s_.start_step;
    const bool setup = local_step == 0 || !timing_is_typical;
    const double device_seconds = on_gpu() ? mine.compute : dist::SpeedEmulator::thread_cpu_seconds() - cpu_start;
    mine.compute += s_.emulator.apply(world_.rank(), plan.global_step, device_seconds, setup);
    mine.batch = double(b);

    // Every rank arrives here before the reduction; a rank that never does is named (--stall-timeout).
    // The wait for slower ranks is idle time, not compute or communication.
    if (s_.fixed_split.empty() && !setup) s_.balancer->record(b, mine.compute);
    dist::RefitVotes vote;
    if (s_.fixed_split.empty()) vote.add(s_.balancer->vote(local_step));
    std::vector<double> agreed = {stop_requests() > 0 ? 1.0 : 0.0,
                                  world_.rank() == 0 && checkpointer_.due_by_time() ? 1.0 : 0.0,
                                  world_.rank() == 0 && outputs_.metrics_failed() ? 1.0 : 0.0,
                                  double(vote.slower), double(vote.faster), double(vote.leaning_slower),
                                  double(vote.leaning_faster)};
    mine.idle = s_.arrival->arrive(plan.global_step, agreed);
    flags = StepFlags{agreed[0], agreed[1], agreed[2],
                      dist::RefitVotes{int64_t(agreed[3]), int64_t(agreed[4]), int64_t(agreed[5]), int64_t(agreed[6])}};

    auto comm_start = Clock::now();
    if (s_.buckets)
      s_.buckets->finish();
    else
      s_.comm->weighted_allreduce(params.grads().data(), params.count(), weight);
    mine.exposed += seconds_since(comm_start);
    // The reduced gradient is the same on every rank; counting its NaN/Inf values rides on the totals'
    // reduction, so every rank stops at the same step with the same message.
    Totals step_totals{loss_sum, correct, double(b), double(count_nonfinite(params.grads()))};
    step_totals.allreduce(world_.comm(), *s_.arrival);
    mine.comm = seconds_since(comm_start);
    // fp16: a step with NaN/Inf is skipped on every rank alike (they all saw the same reduced gradient).
    const LossScaler::Verdict verdict = s_.loss_scaler.update(step_totals.nonfinite > 0);
    const std::string where = "step " + std::to_string(plan.global_step);
    if (verdict == LossScaler::Verdict::GiveUp)
      throw AgreedError(nonfinite_gradient_error(where, int64_t(step_totals.nonfinite / world_.size()), s_.loss_scaler),
                        __FILE__, __LINE__);
    const bool skipped = verdict == LossScaler::Verdict::Skip;
    if (skipped && world_.rank() == 0 && !cfg_.quiet) {
      std::printf("%s\n", skipped_step_text(where, s_.loss_scaler).c_str());
      std::fflush(stdout);
    }

    const float lr = s_.schedule->at(plan.global_step);
    if (!skipped) s_.sgd->step(params, lr);
    if (cfg_.debug_consistency) {
      const Tensor values = params.values().to(Device::CPU);
      world_.check_identical(values.data(), params.count(), "parameters");
    }

    outputs_.log_samples(plan.epoch, plan.indices);
    if (s_.fixed_split.empty()) {
      // A rank whose newest steps left its model (a straggler began or ended) makes everyone refit now,
      // unless every rank moved together (contention: no rank's relative speed changed).
      split_changed_ = s_.balancer->update(local_step, dist::early_refit_agreed(flags.votes, world_.size()));
      if (split_changed_ && world_.rank() == 0 && !cfg_.quiet) {
        std::printf("rebalance: %s\n", s_.balancer->describe(plan.global_step).c_str());
        std::fflush(stdout);
      }
    }
    last_split_ = plan.split;

    StepRecord rec;
    rec.step = plan.global_step;
    rec.epoch = plan.epoch;
    rec.lr = lr;
    rec.skipped = skipped;
    rec.loss_scale = s_.loss_scaler.active() ? s_.loss_scaler.scale() : 0;
    rec.loss = step_totals.loss_sum / std::max(1.0, step_totals.count);
    rec.accuracy = step_totals.correct / std::max(1.0, step_totals.count);
    rec.ranks.resize(world_.size());
    static_assert(sizeof(StepTimes) == 6 * sizeof(double), "StepTimes travels as 6 doubles");
    MPI_Request gathered;
    HT_MPI_CHECK(MPI_Igather(&mine, 6, MPI_DOUBLE, rec.ranks.data(), 6, MPI_DOUBLE, 0, world_.comm(), &gathered));
    s_.arrival->wait(&gathered, 1);
    s_.arrival->step_done();
    rec.step_seconds = seconds_since(step_start);
    window.loss_sum += step_totals.loss_sum;
    window.correct += step_totals.correct;
    window.count += step_totals.count;
    return rec;
  }

  nn::GradsFinal grads_final_hook() {
    if (!s_.buckets) return {};
    return [this](int64_t first_final) { s_.buckets->grads_final(first_final); };
  }

  void report_step(const StepRecord& rec, Totals& window, TrainResult& result, bool stopping) {
    eff_sum_ += rec.balance_efficiency();
    time_sum_ += rec.step_seconds;
    samples_sum_ += rec.global_batch();
    ++window_steps_;
    const bool log_now = cfg_.log_every > 0 && (rec.step + 1) % cfg_.log_every == 0;
    const bool last = rec.step + 1 == s_.total_steps || stopping;
    if (!log_now && !last) return;
    result.final_loss = window.loss_sum / std::max(1.0, window.count);
    const double step_s = time_sum_ / std::max<int64_t>(1, window_steps_);
    const int64_t spe = s_.plan->steps_per_epoch();
    if (!cfg_.quiet)
      std::printf("step %lld/%lld  epoch %.2f/%lld  loss %.4f%s  lr %.4g  %8.1f samples/s  balance %5.1f%%"
                  "  ETA %s\n",
                  (long long)rec.step + 1, (long long)s_.total_steps, double(rec.step + 1) / double(spe),
                  (long long)((s_.total_steps + spe - 1) / spe), result.final_loss,
                  accuracy_text(window.correct / std::max(1.0, window.count)).c_str(), rec.lr,
                  time_sum_ > 0 ? samples_sum_ / time_sum_ : 0.0, 100.0 * eff_sum_ / window_steps_,
                  duration_text(step_s * double(s_.total_steps - rec.step - 1)).c_str());
    if (!s_.detection) warn_if_at_chance(result.final_loss);  // a classifier's chance level is ln(classes)
    std::fflush(stdout);
    window = Totals{};
    eff_sum_ = time_sum_ = 0;
    samples_sum_ = 0;
    window_steps_ = 0;
  }

  // "45s", "12m05s", "3h07m": the remaining time of the run at the recent step rate.
  static std::string duration_text(double seconds) {
    char buf[32];
    const long long t = (long long)std::llround(std::max(0.0, seconds));
    if (t < 60) std::snprintf(buf, sizeof buf, "%llds", t);
    else if (t < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t / 60) % 60);
    return buf;
  }

  // A loss that stays at ln K (uniform guessing over K classes) for many steps means the model is not
  // learning at all, most often a learning rate too high for the model: say so once instead of training on.
  void warn_if_at_chance(double window_loss) {
    const double chance = std::log(double(std::max(2, s_.train->info().num_classes)));
    chance_steps_ = std::abs(window_loss - chance) < 0.01 * chance ? chance_steps_ + window_steps_ : 0;
    if (chance_warned_ || chance_steps_ < kChanceSteps) return;
    chance_warned_ = true;
    std::printf("warning: the training loss has stayed at chance level (ln %d = %.3f) for %lld steps: the model is "
                "not learning; try a lower --lr (e.g. a fifth) or --warmup-epochs\n",
                s_.train->info().num_classes, chance, (long long)chance_steps_);
  }
  static constexpr int64_t kChanceSteps = 100;

  // Batch-norm running statistics differ per rank (each saw its own samples); average them weighted by
  // b_r/B so evaluation and the final model use one set, identical everywhere.
  void sync_running_stats() {
    nn::ParamBuffer& params = s_.model->params();
    if (params.state_count() == 0 || last_split_.empty()) return;
    int64_t total = 0;
    for (int64_t b : last_split_) total += b;
    s_.comm->weighted_allreduce(params.states().data(), params.state_count(),
                                double(last_split_[world_.rank()]) / double(std::max<int64_t>(1, total)));
    if (cfg_.debug_consistency) {
      const Tensor states = params.states().to(Device::CPU);
      world_.check_identical(states.data(), params.state_count(), "batch-norm running statistics");
    }
  }

  // Samples trained when `plan`'s step is done: full steps before its epoch and within it.
  int64_t samples_after(const PlannedStep& plan) const {
    int64_t in_epoch = 0;
    for (int64_t k = 0; k <= plan.step_in_epoch; ++k) in_epoch += s_.plan->batch_size(k);
    return plan.epoch * s_.train->info().num_samples + in_epoch;
  }

  // --val-every-samples: a validation whenever a step passes a multiple of N samples (the epoch's end
  // validates anyway). Its time is left out of the training clock that the line reports.
  void validate_at_points(const PlannedStep& plan) {
    if (!s_.val || cfg_.val_every_samples <= 0) return;
    const int64_t done = samples_after(plan), before = done - plan.global_batch;
    if (done / cfg_.val_every_samples == before / cfg_.val_every_samples) return;
    const auto start = Clock::now();
    sync_running_stats();
    const EvalTotals e = train::evaluate(*s_.model, *s_.val, s_.val_input.get(), world_.comm(), 256);
    if (world_.rank() == 0 && !cfg_.quiet)
      print_validation(done, s_.train->info().num_samples, seconds_since(run_start_) - validation_seconds_, e);
    validation_seconds_ += seconds_since(start);
  }

  void end_epoch(int64_t epoch, TrainResult& result, StepRecord& rec) {
    sync_running_stats();
    if (!s_.val) return;
    const auto start = Clock::now();
    const double clock = seconds_since(run_start_) - validation_seconds_;
    const EvalTotals e = train::evaluate(*s_.model, *s_.val, s_.val_input.get(), world_.comm(), 256);
    validation_seconds_ += seconds_since(start);
    result.val_accuracy = e.headline();
    rec.val_accuracy = result.val_accuracy;
    rec.val_loss = e.loss_sum / std::max(1.0, e.count);
    if (world_.rank() == 0 && !cfg_.quiet) {
      std::printf("epoch %lld: validation loss %.4f, %s (%lld samples)\n", (long long)epoch + 1, rec.val_loss,
                  e.score_text().c_str(), (long long)e.count);
      if (cfg_.val_every_samples > 0)  // the same validation in the form every mode prints
        print_validation((epoch + 1) * s_.train->info().num_samples, s_.train->info().num_samples, clock, e);
      std::fflush(stdout);
    }
  }

  // Batch-norm statistics are synced first, so the file holds the one set every rank would evaluate with.
  void save_checkpoint(int64_t steps_done) {
    s_.arrival->watch(steps_done - 1);  // the statistics' reduction is bounded like the step
    sync_running_stats();
    CheckpointInfo info = checkpoint_info(cfg_, s_, steps_done, world_.size());
    info.split = last_split_;
    if (s_.balancer) {
      const auto& models = s_.balancer->planner().models();
      for (size_t r = 0; r < models.size() && r < info.alpha.size(); ++r)
        info.alpha[r] = models[r].alpha, info.beta[r] = models[r].beta;
    }
    checkpointer_.write(info, s_.model->params(), *s_.sgd, *s_.arrival, steps_done - 1);
  }

 private:
  const TrainConfig& cfg_;
  dist::World& world_;
  Setup s_;
  Outputs outputs_;
  Checkpointer checkpointer_;
  LocalStep local_step_;
  std::deque<PlannedStep> queue_;
  std::optional<DeviceInput::Uploaded> staged_;  // GPU: the next step's batch, already on its way
  int64_t next_step_ = 0;
  bool any_gpu_ = false;         // some rank trains on a GPU (the same on every rank)
  int64_t min_share_;  // 2 for models with batch norm (running statistics), else 1
  bool split_changed_ = false;   // the balancer changed the split after the last step
  std::vector<int64_t> last_split_;
  double eff_sum_ = 0, time_sum_ = 0;
  int64_t samples_sum_ = 0, window_steps_ = 0;
  int64_t chance_steps_ = 0;  // consecutive logged steps whose loss sat at ln K
  Clock::time_point run_start_;
  double validation_seconds_ = 0;  // left out of the training clock of --val-every-samples lines
  bool chance_warned_ = false;
};

}  // namespace

TrainResult run_training(const TrainConfig& config) {
  if (config.mode != "sync") return run_elastic_training(config);
  install_stop_handlers();
  Trainer trainer(config);
  return trainer.run();
}

}  // namespace hetrain::train
