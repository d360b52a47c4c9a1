#include "train/shares.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "hetrain/dist/balance.hpp"

namespace hetrain::train {

std::vector<int64_t> scale_split(const std::vector<int64_t>& split, int64_t full_batch, int64_t batch) {
  if (batch == full_batch) return split;
  std::vector<double> exact(split.size());
  for (size_t r = 0; r < split.size(); ++r) exact[r] = double(split[r]) * double(batch) / double(full_batch);
  return dist::round_largest_remainder(exact, batch);
}

std::vector<int64_t> scale_split_in_groups(const std::vector<int64_t>& split, int64_t full_batch, int64_t batch,
                                           int64_t group) {
  if (batch == full_batch) return split;
  std::vector<int64_t> units(split.size());
  for (size_t r = 0; r < split.size(); ++r) units[r] = split[r] / group;
  const int64_t groups = (batch + group - 1) / group;
  std::vector<int64_t> out = scale_split(units, full_batch / group, groups);
  for (int64_t& b : out) b *= group;
  int64_t excess = groups * group - batch;  // < group: the last group's missing samples
  for (size_t r = out.size(); r-- > 0 && excess > 0;)
    if (out[r] > 0) out[r] -= excess, excess = 0;
  return out;
}

int64_t share_offset(const std::vector<int64_t>& split, int rank) {
  int64_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += split[size_t(r)];
  return offset;
}

Share member_share(const std::vector<int64_t>& member_batches, int member, int64_t claimed) {
  const int64_t offset = share_offset(member_batches, member);
  Share s;
  s.offset = std::min(offset, claimed);
  s.count = std::max<int64_t>(0, std::min(member_batches[size_t(member)], claimed - offset));
  return s;
}

std::vector<EpochPart> parts_by_epoch(int64_t first, int64_t n, int64_t per_epoch) {
  std::vector<EpochPart> out;
  while (n > 0) {
    EpochPart p;
    p.epoch = first / per_epoch, p.position = first % per_epoch;
    p.count = std::min(n, per_epoch - p.position);
    out.push_back(p);
    first += p.count;
    n -= p.count;
  }
  return out;
}

}  // namespace hetrain::train
