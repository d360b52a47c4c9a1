// Gradient buckets: the plan, and starting each bucket's reduction when backward has finished it
// (hetrain/dist/buckets.hpp).
#include "hetrain/dist/buckets.hpp"

#include <algorithm>
#include <cmath>

#include "hetrain/error.hpp"

namespace hetrain::dist {

std::vector<Bucket> plan_buckets(const std::vector<int64_t>& param_begins, int64_t count, int64_t bucket_floats) {
  HT_CHECK(count >= 0, "plan_buckets: negative buffer size ", count);
  for (size_t i = 0; i < param_begins.size(); ++i)
    HT_CHECK(param_begins[i] >= 0 && param_begins[i] <= count && (i == 0 || param_begins[i] >= param_begins[i - 1]),
             "plan_buckets: parameter offsets must ascend within [0, ", count, "]");
  HT_CHECK(param_begins.empty() || param_begins.front() == 0, "plan_buckets: the first parameter must begin at 0");
  if (count == 0) return {};
  if (bucket_floats <= 0) return {Bucket{0, count}};
  std::vector<Bucket> out;
  int64_t end = count;
  for (size_t i = param_begins.size(); i-- > 0;) {
    const int64_t begin = param_begins[i];
    if (end - begin >= bucket_floats || begin == 0) {
      if (begin < end) out.push_back(Bucket{begin, end});
      end = begin;
    }
  }
  if (end > 0) out.push_back(Bucket{0, end});  // no parameter list: nothing to cut at
  return out;
}

int64_t bucket_floats(double mb) {
  HT_CHECK(std::isfinite(mb) && mb >= 0, "--bucket-mb must be a finite number >= 0, got ", mb);
  if (mb == 0) return 0;
  return std::max<int64_t>(1, int64_t(std::llround(mb * 1024.0 * 1024.0 / double(sizeof(float)))));
}

BucketedReduction::BucketedReduction(Communicator& comm, std::vector<Bucket> buckets, Wire wire)
    : comm_(comm), buckets_(std::move(buckets)), wire_(wire) {
  HT_CHECK(comm.carries(wire), "--reduce-precision ", wire_name(wire), ": the ", comm.name(),
           " reduction has no 16-bit transport");
}

void BucketedReduction::begin(float* grads, double weight) {
  HT_CHECK(next_ == 0 || next_ == buckets_.size(), "internal: a new step while buckets of the last are unfinished");
  grads_ = grads;
  weight_ = weight;
  next_ = 0;
}

void BucketedReduction::grads_final(int64_t first_final) {
  while (next_ < buckets_.size() && buckets_[next_].begin >= first_final) {
    const Bucket& b = buckets_[next_++];
    comm_.start_weighted_allreduce(grads_ + b.begin, b.size(), weight_, wire_);
  }
}

void BucketedReduction::finish() {
  start_rest();
  comm_.wait_all();
}

}  // namespace hetrain::dist
