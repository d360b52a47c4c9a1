// EpochPlan: epoch e's order is a Fisher–Yates permutation seeded by (seed, e); step s owns positions
// [s·B, s·B + b_s). Every rank derives the same permutation locally, so no communication is needed, and
// any split of a step's range into per-rank slices covers each sample exactly once.
#include "data/rng.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

EpochPlan::EpochPlan(uint64_t seed, int64_t num_samples, int64_t global_batch, LastBatch last, bool shuffle)
    : seed_(seed), n_(num_samples), batch_(global_batch), shuffle_(shuffle) {
  HT_CHECK(num_samples > 0, "epoch plan: dataset has no samples");
  HT_CHECK(global_batch > 0, "epoch plan: global batch must be positive, got ", global_batch);
  if (last == LastBatch::Drop) {
    steps_ = n_ / batch_;
    HT_CHECK(steps_ > 0, "epoch plan: global batch ", batch_, " exceeds the ", n_,
             " samples and the last partial batch is dropped: no steps");
  } else {
    steps_ = (n_ + batch_ - 1) / batch_;
  }
}

int64_t EpochPlan::batch_size(int64_t step) const {
  HT_CHECK(step >= 0 && step < steps_, "epoch plan: step ", step, " outside [0, ", steps_, ")");
  return std::min(batch_, n_ - step * batch_);
}

std::vector<int64_t> EpochPlan::permutation(int64_t epoch) const {
  HT_CHECK(epoch >= 0, "epoch plan: negative epoch ", epoch);
  if (!shuffle_) {
    std::vector<int64_t> p(n_);
    for (int64_t i = 0; i < n_; ++i) p[i] = i;
    return p;
  }
  return seeded_permutation(splitmix64(seed_) ^ splitmix64(0x5851F42D4C957F2Dull + uint64_t(epoch)), n_);
}

std::vector<int64_t> EpochPlan::slice(int64_t epoch, int64_t step, int64_t offset, int64_t count) const {
  int64_t b = batch_size(step);
  HT_CHECK(offset >= 0 && count >= 0 && offset + count <= b, "epoch plan: slice [", offset, ", ", offset + count,
           ") outside the ", b, " samples of step ", step);
  return span(epoch, step * batch_ + offset, count);
}

std::vector<int64_t> EpochPlan::span(int64_t epoch, int64_t position, int64_t count) const {
  HT_CHECK(position >= 0 && count >= 0 && position + count <= n_, "epoch plan: positions [", position, ", ",
           position + count, ") outside the ", n_, " samples of an epoch");
  if (!shuffle_) {
    std::vector<int64_t> out(count);
    for (int64_t i = 0; i < count; ++i) out[i] = position + i;
    return out;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (cached_epoch_ != epoch) {
    cached_perm_ = permutation(epoch);
    cached_epoch_ = epoch;
  }
  return std::vector<int64_t>(cached_perm_.begin() + position, cached_perm_.begin() + position + count);
}

}  // namespace hetrain::data
