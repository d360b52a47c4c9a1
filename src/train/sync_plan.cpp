#include "train/sync_plan.hpp"

#include <mpi.h>

#include <algorithm>

#include "hetrain/error.hpp"
#include "train/shared_step.hpp"
#include "train/shares.hpp"

namespace hetrain::train {
namespace {

bool any_rank(MPI_Comm comm, bool mine) {
  int v = mine ? 1 : 0;
  HT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, comm));
  return v != 0;
}

}  // namespace

int64_t PlannedStep::local_samples() const {
  int64_t n = 0;
  for (const MicroBatch& m : micro) n += m.split[size_t(rank)];
  return n;
}

SyncPlanner::SyncPlanner(const TrainConfig& cfg, Setup& s, const dist::World& world, bool keep_indices)
    : cfg_(cfg),
      s_(s),
      rank_(world.rank()),
      keep_indices_(keep_indices),
      any_gpu_(any_rank(world.comm(), s.device_kind == Device::CUDA)),
      min_share_(s.model->params().state_count() > 0 ? 2 : 1),
      next_step_(s.start_step) {}

// The split of a step of `batch` samples: the balancer's (or the fixed) split, scaled down by largest
// remainder for a short step. The balancer's splits give a rank of a model with batch norm no samples or
// at least two (dist::respect_min_share); a fixed --split is the user's. Ghost batch norm's shares stay
// whole groups.
std::vector<int64_t> SyncPlanner::split_for(int64_t batch) const {
  if (s_.batch_norm->kind == nn::BatchNormMode::Kind::Ghost) {
    const std::vector<int64_t>& full = s_.fixed_split.empty() ? s_.balancer->split() : s_.fixed_split;
    return scale_split_in_groups(full, cfg_.global_batch, batch, s_.batch_norm->ghost_group);
  }
  if (!s_.fixed_split.empty()) return scale_split(s_.fixed_split, cfg_.global_batch, batch);
  return dist::respect_min_share(scale_split(s_.balancer->split(), cfg_.global_batch, batch), min_share_);
}

void SyncPlanner::fill() {
  const int64_t steps_per_epoch = s_.plan->steps_per_epoch();
  // --stop-at-step ends the run early without changing its schedule: nothing past it is requested.
  const int64_t total = cfg_.stop_at_step > 0 ? std::min(s_.total_steps, cfg_.stop_at_step) : s_.total_steps;
  // GPU ranks take uint8 batches and augment on the device (train/device_step.hpp).
  const data::BatchForm form = s_.device_kind == Device::CUDA ? data::BatchForm::Raw : data::BatchForm::Float;
  while (int64_t(queue_.size()) < std::max(1, cfg_.prefetch_depth) && next_step_ < total) {
    PlannedStep p;
    p.rank = rank_;
    p.global_step = next_step_++;
    p.epoch = p.global_step / steps_per_epoch;
    p.step_in_epoch = p.global_step % steps_per_epoch;
    // Resumed inside a step (an asynchronous run stopped there): the first step trains the rest of it.
    const int64_t skip = p.global_step == s_.start_step ? s_.start_skip : 0;
    p.global_batch = s_.plan->batch_size(p.step_in_epoch) - skip;
    for (int64_t start = 0; start < p.global_batch; start += cfg_.global_batch) {
      MicroBatch m;
      m.size = std::min(cfg_.global_batch, p.global_batch - start);
      m.split = split_for(m.size);
      const int64_t offset = skip + start + share_offset(m.split, rank_);
      auto indices = s_.plan->slice(p.epoch, p.step_in_epoch, offset, m.split[size_t(rank_)]);
      if (keep_indices_) p.indices.insert(p.indices.end(), indices.begin(), indices.end());
      s_.train->submit(std::move(indices), s_.augment, augmentation_seed(cfg_.seed, p.epoch), form);
      p.micro.push_back(std::move(m));
    }
    p.split = p.micro.front().split;
    queue_.push_back(std::move(p));
  }
}

PlannedStep SyncPlanner::pop() {
  PlannedStep p = std::move(queue_.front());
  queue_.pop_front();
  return p;
}

// The steps already requested still carry the old split; the first of them runs at it, and on a
// straggler's first step that costs most of a step. A job of CPU ranks only reads those batches again with
// the new split (one batch's read, against a step at the old split). A GPU rank has the next batch uploaded
// already, so jobs with GPUs keep the requested steps as they are. Every rank decides alike (any_gpu_ and
// the new split are the same everywhere), so the sample slices agree.
void SyncPlanner::replan() {
  if (any_gpu_ || queue_.empty()) return;
  bool stale = false;
  for (const PlannedStep& p : queue_)
    for (const MicroBatch& m : p.micro) stale = stale || m.split != split_for(m.size);
  if (!stale) return;
  for (const PlannedStep& p : queue_)  // requested in this order; dropped
    for (size_t k = 0; k < p.micro.size(); ++k) (void)s_.train->next();
  next_step_ = queue_.front().global_step;
  queue_.clear();
}

}  // namespace hetrain::train
