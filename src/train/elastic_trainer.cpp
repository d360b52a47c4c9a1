// The asynchronous and hybrid training modes (docs/architecture.md, "Training modes"): shared-memory
// elastic averaging SGD over a center model in MPI one-sided memory (dist/elastic.hpp).
//
// Every rank belongs to a group: in async mode a group of one, in hybrid mode the ranks of a node (or of
// --groups). A group trains like a small synchronous job: its leader claims the group's next samples from
// the global counter, each member takes its share, the members' gradients are reduced weighted by their
// shares, and every member applies the same SGD step. Every tau local steps the leader trades with the
// center: delta = alpha (W_local - W_center), W_local -= delta, W_center += delta; then the group takes the
// leader's weights. Groups never wait for each other. Training ends when the counter has handed out every
// sample of every epoch; the center is then the model: it is evaluated, checkpointed and dumped.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "hetrain/dist.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"
#include "hetrain/optim.hpp"
#include "hetrain/train.hpp"
#include "train/checkpointer.hpp"
#include "train/evaluate.hpp"
#include "train/local_step.hpp"
#include "train/outputs.hpp"
#include "train/setup.hpp"
#include "train/stop_signals.hpp"

namespace hetrain::train {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The group this rank trains with: hybrid mode's node or --groups list; async mode's group of one.
MPI_Comm make_group_comm(const TrainConfig& cfg, const dist::World& world) {
  int color = world.rank();
  if (cfg.mode == "hybrid") {
    const std::vector<int> listed = parse_groups(cfg.groups, world.size());
    if (listed.empty()) {  // "node": named after the lowest world rank on the node
      int lowest = world.rank();
      HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, world.node_comm()));
      color = lowest;
    } else {
      color = listed[size_t(world.rank())];
    }
  }
  MPI_Comm group = MPI_COMM_NULL;
  HT_MPI_CHECK(MPI_Comm_split(world.comm(), color, world.rank(), &group));
  HT_MPI_CHECK(MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN));
  return group;
}

class ElasticTrainer {
 public:
  explicit ElasticTrainer(const TrainConfig& cfg)
      : cfg_(cfg),
        world_(dist::World::get()),
        s_(make_setup(cfg, world_)),
        outputs_(cfg, world_),
        checkpointer_(cfg, world_),
        local_step_(s_, cfg.label_smoothing) {
    group_ = make_group_comm(cfg, world_);
    HT_MPI_CHECK(MPI_Comm_rank(group_, &group_rank_));
    HT_MPI_CHECK(MPI_Comm_size(group_, &group_size_));
    // This rank's samples per local step: --local-batch, else an equal share of B, within the GPU's memory.
    local_batch_ = cfg.local_batch > 0 ? cfg.local_batch : std::max<int64_t>(1, cfg.global_batch / world_.size());
    if (s_.memory_cap > 0) local_batch_ = std::min(local_batch_, s_.memory_cap);
    member_batches_.resize(size_t(group_size_));
    HT_MPI_CHECK(MPI_Allgather(&local_batch_, 1, MPI_INT64_T, member_batches_.data(), 1, MPI_INT64_T, group_));
    group_batch_ = std::accumulate(member_batches_.begin(), member_batches_.end(), int64_t(0));
    if (group_size_ > 1) group_comm_ = dist::make_gradient_communicator(group_, s_.device_kind, false);
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
    if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
  }

  TrainResult run() {
    announce();
    nn::ParamBuffer& params = s_.model->params();
    const int64_t first_sample = std::min(s_.start_step * cfg_.global_batch, total_samples_);
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
    nn::set_between_layers_hook(&dist::RmaProgress::poll);
    center_ = &center;
    counter_ = &counter;

    const auto start = run_start_ = Clock::now();
    report_time_ = start;
    next_validation_ = (first_sample / validate_every_ + 1) * validate_every_;
    report_position_ = first_sample;
    bool stopped = false;
    while (true) {
      // The leader claims the group's samples and tells the members: [first, first + n), or a stop.
      // claim[1] > 0: samples [claim[0], +claim[1]); 0: the counter is exhausted; -1: a stop at claim[0].
      int64_t claim[2] = {0, 0};
      if (stop_requests() > 0 && !stop_sent_) counter.request_stop(), stop_sent_ = true;  // any rank's signal
      if (group_rank_ == 0) {
        const dist::SampleCounter::Claim c = counter.claim(group_batch_);
        if (c.stopped) {
          claim[0] = counter.stop_position(), claim[1] = -1;
        } else {
          claim[0] = c.first;
          claim[1] = std::max<int64_t>(0, std::min(group_batch_, total_samples_ - c.first));
        }
      }
      if (group_size_ > 1) HT_MPI_CHECK(MPI_Bcast(claim, 2, MPI_INT64_T, 0, group_));
      // Validation points up to what this claim shows to be passed: every rank reaches the same points in
      // the same order (the stop position is the same for all; exhaustion passes every point).
      validate_up_to(claim[1] > 0 ? claim[0] : claim[1] == 0 ? total_samples_ - 1 : claim[0]);
      if (claim[1] <= 0) {
        stopped = claim[1] < 0;
        break;
      }
      train_local_step(claim[0], claim[1]);
      if (local_steps_ % cfg_.elastic_every == 0) trade_with_center();
    }
    const double train_seconds = seconds_since(start) - validation_seconds_;

    // Every rank is done pushing: the center is the model, on every rank alike.
    HT_MPI_CHECK(MPI_Barrier(world_.comm()));
    const int64_t samples_done = std::min(counter.claimed(), total_samples_);
    HT_MPI_CHECK(MPI_Barrier(world_.comm()));  // nobody closes the counter while another still reads it
    center.read(host.data());
    if (on_gpu()) params.values().copy_from(host);  // on the CPU, host is the parameters themselves
    center_ = nullptr;
    counter_ = nullptr;
    nn::set_between_layers_hook(nullptr);
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
      const EvalTotals e = train::evaluate(*s_.model, *s_.val, s_.val_input.get(), world_.comm(), 256);
      result.val_accuracy = e.top1 / std::max(1.0, e.count);
      if (world_.rank() == 0 && !cfg_.quiet)
        print_validation(samples_done, s_.train->info().num_samples, train_seconds, e);
    }
    if (checkpointer_.enabled()) save_checkpoint(samples_done);
    report_end(result, stopped);
    outputs_.finish(params);
    return result;
  }

 private:
  // The samples at global positions [first, first + n) of the concatenated epoch orders.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> samples_at(int64_t first, int64_t n) const {
    const int64_t per_epoch = s_.train->info().num_samples;
    std::vector<std::pair<int64_t, std::vector<int64_t>>> out;  // (epoch, indices), one per epoch touched
    while (n > 0) {
      const int64_t epoch = first / per_epoch, position = first % per_epoch;
      const int64_t take = std::min(n, per_epoch - position);
      out.push_back({epoch, s_.plan->span(epoch, position, take)});
      first += take;
      n -= take;
    }
    return out;
  }

  bool on_gpu() const { return s_.device_kind == Device::CUDA; }

  // Collective: the center evaluated at every validation point not after `position` (and before the
  // end, which evaluates anyway). The ranks wait for each other here, so this time, like the evaluation,
  // is left out of the training clock.
  void validate_up_to(int64_t position) {
    if (!s_.val) return;
    while (next_validation_ <= position && next_validation_ < total_samples_) {
      const auto start = Clock::now();
      nn::ParamBuffer& params = s_.model->params();
      const Tensor values = params.values().clone(), states = params.states().clone();  // this rank's own
      Tensor host = params.values().to(Device::CPU);
      center_->read(host.data());
      if (on_gpu()) params.values().copy_from(host);
      sync_running_stats();
      const EvalTotals e = train::evaluate(*s_.model, *s_.val, s_.val_input.get(), world_.comm(), 256);
      params.values().copy_from(values);
      params.states().copy_from(states);
      const double clock = seconds_since(run_start_) - validation_seconds_;
      if (world_.rank() == 0 && !cfg_.quiet) print_validation(next_validation_, s_.train->info().num_samples, clock, e);
      next_validation_ += validate_every_;
      validation_seconds_ += seconds_since(start);
    }
  }

  // One local step of this rank inside its group's claim [first, first + n).
  void train_local_step(int64_t first, int64_t n) {
    auto step_start = Clock::now();
    // Members take consecutive shares of the claim; a short last claim leaves the last members less.
    int64_t offset = 0;
    for (int m = 0; m < group_rank_; ++m) offset += member_batches_[size_t(m)];
    const int64_t b = std::max<int64_t>(0, std::min(local_batch_, n - offset));
    std::vector<int64_t> indices;
    for (auto& [epoch, part] : samples_at(first + std::min(offset, n), b)) {
      outputs_.log_samples(epoch, part);
      indices.insert(indices.end(), part.begin(), part.end());
    }
    const int64_t epoch = first / s_.train->info().num_samples;
    const uint64_t aug_seed = cfg_.seed * 0x9e3779b97f4a7c15ull + uint64_t(epoch) * 1000003ull;
    s_.train->submit(std::move(indices), cfg_.augment, aug_seed,
                     on_gpu() ? data::BatchForm::Raw : data::BatchForm::Float);
    data::Batch batch = s_.train->next();
    DeviceInput::Uploaded input;
    if (on_gpu()) input = s_.input->upload(batch);
    window_wait_ += seconds_since(step_start);
    HT_CHECK(!(world_.rank() == s_.fail_rank && local_steps_ == s_.fail_step),
             "failure injected by --debug-fail-at at local step ", local_steps_);

    auto compute_start = Clock::now();
    const LocalOutcome local = local_step_.run(batch, input, b);
    double compute = seconds_since(compute_start);
    // Emulated speed changes (--emulate-schedule) happen at the same global step in every mode.
    compute += s_.emulator.apply(world_.rank(), first / cfg_.global_batch, compute);
    window_compute_ += compute;

    nn::ParamBuffer& params = s_.model->params();
    if (group_comm_) {  // the group's gradient, weighted by each member's share of the claim
      auto comm_start = Clock::now();
      group_comm_->weighted_allreduce(params.grads().data(), params.count(), double(b) / double(n));
      window_comm_ += seconds_since(comm_start);
    }
    // The learning rate follows the samples consumed by all groups, in steps of the global batch.
    const int64_t step = std::min(first / cfg_.global_batch, s_.total_steps - 1);
    window_lr_ = s_.schedule->at(step);
    s_.sgd->step(params, window_lr_);
    if (cfg_.debug_consistency && group_size_ > 1) {  // the members of a group stay identical replicas
      const Tensor values = params.values().to(Device::CPU);
      dist::check_identical(group_, values.data(), params.count(), "parameters within a hybrid group");
    }
    ++local_steps_;
    trained_samples_ += b;
    if (group_rank_ == 0 && cfg_.mode == "hybrid") counter_->add_trained(leader_, n);
    window_loss_ += local.loss_sum;
    window_correct_ += local.correct;
    window_count_ += double(b);
    if (world_.rank() == 0) maybe_report(first + n);
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
      staleness_sum_ += double(counter_->count_update() - seen);
      ++pushes_;
      if (on_gpu()) params.values().copy_from(local);
    }
    if (group_size_ > 1) {
      Tensor host = on_gpu() ? params.values().to(Device::CPU) : params.values();
      HT_MPI_CHECK(MPI_Bcast(host.data(), int(params.count()), MPI_FLOAT, 0, group_));
      if (on_gpu()) params.values().copy_from(host);
    }
    window_comm_ += seconds_since(start);
  }

  // Rank 0's progress line every --log-every of its local steps: the global position, its group's loss.
  void maybe_report(int64_t position) {
    if (cfg_.quiet || cfg_.log_every <= 0 || local_steps_ % cfg_.log_every != 0) return;
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - report_time_).count();
    const double rate = seconds > 0 ? double(position - report_position_) / seconds : 0;
    const int64_t per_epoch = s_.train->info().num_samples;
    last_window_loss_ = window_loss_ / std::max(1.0, window_count_);
    std::string groups;  // hybrid: each group's rate since the last line
    if (cfg_.mode == "hybrid") {
      const std::vector<int64_t> trained = counter_->trained_by_leader();
      if (last_trained_.empty()) last_trained_.assign(trained.size(), 0);
      for (size_t r = 0; r < trained.size(); ++r) {
        if (leaders_[r] != int(r)) continue;
        char part[64];
        std::snprintf(part, sizeof part, "%s%d: %.0f", groups.empty() ? "" : ", ", group_number(int(r)),
                      seconds > 0 ? double(trained[r] - last_trained_[r]) / seconds : 0.0);
        groups += part;
      }
      groups = "  groups [" + groups + "] samples/s";
      last_trained_ = trained;
    }
    std::printf("samples %lld/%lld  epoch %.2f/%d  loss %.4f  acc %6.2f%%  lr %.4g  %8.1f samples/s (all ranks)%s"
                "  staleness %.2f  compute %.0f%%\n",
                (long long)position, (long long)total_samples_, double(position) / double(per_epoch), cfg_.epochs,
                last_window_loss_, 100.0 * window_correct_ / std::max(1.0, window_count_), window_lr_, rate, groups.c_str(),
                pushes_ > 0 ? staleness_sum_ / double(pushes_) : 0.0,
                100.0 * window_compute_ / std::max(1e-9, window_compute_ + window_wait_ + window_comm_));
    std::fflush(stdout);
    report_time_ = now;
    report_position_ = position;
    window_loss_ = window_correct_ = window_count_ = 0;
    window_compute_ = window_wait_ = window_comm_ = 0;
  }

  // Groups numbered 0, 1, ... in the order of their leaders' ranks.
  int group_number(int leader) const {
    int number = 0;
    for (int r = 0; r < leader; ++r) number += leaders_[size_t(r)] == r;
    return number;
  }

  void announce() {
    const std::string table =
        world_.rank_table(cfg_.mode == "hybrid" ? s_.device + ", group " + std::to_string(group_number(leader_)) : s_.device);
    std::vector<int64_t> batches(size_t(world_.size()));
    HT_MPI_CHECK(MPI_Allgather(&local_batch_, 1, MPI_INT64_T, batches.data(), 1, MPI_INT64_T, world_.comm()));
    const std::vector<int>& leaders = leaders_;
    if (world_.rank() != 0) return;
    for (const std::string& note : s_.notes) std::printf("%s\n", note.c_str());
    if (!cfg_.quiet) {
      const auto& info = s_.train->info();
      std::printf("hetrain: %d rank(s), mode %s\n%s", world_.size(), cfg_.mode.c_str(), table.c_str());
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
      std::printf("elastic averaging: alpha %g every %d local step(s); groups %s; local batches [%s]\n",
                  cfg_.elastic_alpha, cfg_.elastic_every, groups.c_str(), local.c_str());
      if (s_.start_step > 0)
        std::printf("resuming at sample %lld of %lld\n", (long long)(s_.start_step * cfg_.global_batch),
                    (long long)total_samples_);
      if (s_.emulator.active()) std::printf("%s\n", s_.emulator.describe().c_str());
    }
    std::fflush(stdout);
  }

  // Batch-norm running statistics: every rank saw its own samples; the model keeps their plain mean.
  void sync_running_stats() {
    nn::ParamBuffer& params = s_.model->params();
    if (params.state_count() == 0) return;
    s_.comm->weighted_allreduce(params.states().data(), params.state_count(), 1.0 / double(world_.size()));
  }

  void save_checkpoint(int64_t samples_done) {
    // A resume continues at this step boundary of the global batch (samples past it are trained again).
    CheckpointInfo info = checkpoint_info(cfg_, s_, samples_done / cfg_.global_batch, world_.size());
    info.split.assign(size_t(world_.size()), local_batch_);
    checkpointer_.write(info, s_.model->params(), *s_.sgd);
  }

  void report_end(const TrainResult& result, bool stopped) {
    double staleness[2] = {staleness_sum_, double(pushes_)};
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, staleness, 2, MPI_DOUBLE, MPI_SUM, world_.comm()));
    double slowest = slowest_center_op_;
    HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &slowest, 1, MPI_DOUBLE, MPI_MAX, world_.comm()));
    if (world_.rank() != 0) return;
    if (stopped)
      std::printf("stopped after %lld of %lld samples (stop signal)%s\n", (long long)(result.steps * cfg_.global_batch),
                  (long long)total_samples_, checkpointer_.enabled() ? "; continue with --resume auto" : "");
    char val[48] = "";
    if (result.val_accuracy >= 0) std::snprintf(val, sizeof val, ", val accuracy %.2f%%", 100.0 * result.val_accuracy);
    if (!cfg_.quiet)
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
  std::vector<int64_t> last_trained_;  // rank 0, hybrid: each group's samples at the last progress line
  std::unique_ptr<dist::Communicator> group_comm_;  // groups of two or more: the in-group reduction
  int64_t local_batch_ = 1, group_batch_ = 1, total_samples_ = 0;
  std::vector<int64_t> member_batches_;
  dist::ElasticCenter* center_ = nullptr;
  dist::SampleCounter* counter_ = nullptr;
  std::vector<float> center_values_, delta_;
  bool stop_sent_ = false;
  int64_t local_steps_ = 0, trained_samples_ = 0, pushes_ = 0;
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
