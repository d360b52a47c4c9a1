// Which samples a rank trains: the arithmetic of the modes' sample choice, kept free of MPI so it can be
// tested alone (test/train/shares_test.cpp). docs/architecture.md, "Training loop".
#pragma once

#include <cstdint>
#include <vector>

namespace hetrain::train {

// Sync: `split` (Σ = full_batch) scaled to a step of `batch` samples (a partial last batch, or the rest
// of a step an asynchronous run stopped inside), rounded by largest remainder: Σ = batch, ties to the
// lower rank.
std::vector<int64_t> scale_split(const std::vector<int64_t>& split, int64_t full_batch, int64_t batch);

// Sync with ghost batch norm (--bn ghost:G): `split` (every share a multiple of G, Σ = full_batch, itself
// a multiple of G) scaled to a step of `batch` samples in whole groups, so every rank's slice still starts
// at a group boundary of the step; the step's last group, when `batch` is no multiple of G, is the short
// one, at the end of the last rank that has samples.
std::vector<int64_t> scale_split_in_groups(const std::vector<int64_t>& split, int64_t full_batch, int64_t batch,
                                           int64_t group);

// Sync: where rank `rank`'s slice of a step begins, Σ split[q] for q < rank.
int64_t share_offset(const std::vector<int64_t>& split, int rank);

// Hybrid (and async, a group of one): a member's part of its group's claim of `claimed` samples. The
// members take consecutive shares in rank order; a short last claim leaves the last members less, or none.
struct Share {
  int64_t offset = 0;  // from the claim's first sample
  int64_t count = 0;
};
Share member_share(const std::vector<int64_t>& member_batches, int member, int64_t claimed);

// The asynchronous modes count samples in the concatenation of the epoch orders: positions [first,
// first + n) cut at the epoch boundaries, each part as (epoch, position in the epoch, count).
struct EpochPart {
  int64_t epoch = 0, position = 0, count = 0;
};
std::vector<EpochPart> parts_by_epoch(int64_t first, int64_t n, int64_t per_epoch);

}  // namespace hetrain::train
