// Gradient buckets: the plan (whole parameters, from the end of the buffer, covering it once), --bucket-mb
// and --hierarchical parsing, and the property the overlap rests on: a bucket started during backward
// already holds its final gradients (checked on resnet20, whose blocks' shortcuts run after their main path).
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "hetrain/dist/buckets.hpp"
#include "hetrain/error.hpp"
#include "hetrain/nn.hpp"

using namespace hetrain;
using namespace hetrain::dist;

namespace {
// Buckets must tile [0, count) from the end down, each bucket adjacent to the one before it.
void expect_tiles(const std::vector<Bucket>& b, int64_t count) {
  int64_t end = count;
  for (const Bucket& x : b) {
    EXPECT_EQ(x.end, end);
    EXPECT_LT(x.begin, x.end);
    end = x.begin;
  }
  EXPECT_EQ(end, 0);
}
}  // namespace

TEST(PlanBuckets, WholeParametersFromTheEnd) {
  // Parameters of sizes 4, 10, 3, 3, 6 (count 26).
  const std::vector<int64_t> begins = {0, 4, 14, 17, 20};
  auto b = plan_buckets(begins, 26, 8);
  // From the end: 6 < 8 so 6+3 = 9 closes [17, 26); then 3 + 10 = 13 closes [4, 17); the rest [0, 4).
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].begin, 17);
  EXPECT_EQ(b[1].begin, 4);
  EXPECT_EQ(b[2].begin, 0);
  expect_tiles(b, 26);
  // A parameter larger than a bucket is a bucket of its own, never split.
  b = plan_buckets(begins, 26, 1);
  ASSERT_EQ(b.size(), 5u);
  expect_tiles(b, 26);
  EXPECT_EQ(b[3].begin, 4);
  EXPECT_EQ(b[3].size(), 10);
}

TEST(PlanBuckets, ZeroMeansOneBucketAndLargeMeansOne) {
  const std::vector<int64_t> begins = {0, 4, 14};
  for (int64_t floats : {int64_t(0), int64_t(-1), int64_t(1000)}) {
    auto b = plan_buckets(begins, 20, floats);
    ASSERT_EQ(b.size(), 1u) << floats;
    EXPECT_EQ(b[0].begin, 0);
    EXPECT_EQ(b[0].end, 20);
  }
  EXPECT_TRUE(plan_buckets({}, 0, 8).empty());
  expect_tiles(plan_buckets({}, 20, 8), 20);  // no parameter list: one bucket
}

TEST(PlanBuckets, RejectsBadOffsets) {
  EXPECT_THROW(plan_buckets({0, 5, 3}, 10, 4), Error);   // not ascending
  EXPECT_THROW(plan_buckets({1, 5}, 10, 4), Error);      // the first parameter must begin at 0
  EXPECT_THROW(plan_buckets({0, 12}, 10, 4), Error);     // past the end
}

TEST(PlanBuckets, ResnetAtTwentyFiveMiB) {
  nn::ModelConfig mc;
  mc.name = "resnet50";
  auto m = nn::Model::create(mc);
  std::vector<int64_t> begins;
  for (const auto& p : m->params().specs()) begins.push_back(p.offset);
  const int64_t count = m->param_count(), cap = bucket_floats(25);
  auto b = plan_buckets(begins, count, cap);
  expect_tiles(b, count);
  EXPECT_GE(b.size(), 3u);  // 23.5 M floats (94 MB) in buckets of 6.5 M floats
  for (size_t i = 0; i + 1 < b.size(); ++i) EXPECT_GE(b[i].size(), cap);  // only the last may be short
}

TEST(BucketMb, MebibytesOfFloats) {
  EXPECT_EQ(bucket_floats(0), 0);
  EXPECT_EQ(bucket_floats(25), 25 * 1024 * 1024 / 4);
  EXPECT_EQ(bucket_floats(1e-9), 1);  // tiny but positive: buckets of one parameter each
  EXPECT_THROW(bucket_floats(-1), Error);
  EXPECT_THROW(bucket_floats(std::numeric_limits<double>::infinity()), Error);
}

TEST(Hierarchy, ParseAndAutomaticChoice) {
  EXPECT_EQ(parse_hierarchy("auto"), Hierarchy::Auto);
  EXPECT_EQ(parse_hierarchy("on"), Hierarchy::On);
  EXPECT_EQ(parse_hierarchy("off"), Hierarchy::Off);
  EXPECT_THROW(parse_hierarchy("yes"), Error);
  EXPECT_TRUE(use_hierarchy(Hierarchy::Auto, 2, 2));
  EXPECT_FALSE(use_hierarchy(Hierarchy::Auto, 1, 4));  // one node: nothing crosses a network
  EXPECT_FALSE(use_hierarchy(Hierarchy::Auto, 4, 1));  // one rank per node: nothing to gather first
  EXPECT_TRUE(use_hierarchy(Hierarchy::On, 1, 1));
  EXPECT_FALSE(use_hierarchy(Hierarchy::Off, 8, 8));
}

namespace {
// Records each started bucket's contents at the moment it starts; wait_all() does nothing.
class Recorder : public Communicator {
 public:
  const char* name() const override { return "recorder"; }
  void allreduce_sum(float*, int64_t) override {}
  void start_weighted_allreduce(float* grads, int64_t n, double, Wire) override {
    starts.push_back({grads, std::vector<float>(grads, grads + n)});
  }
  void wait_all() override {}
  struct Start {
    float* at;
    std::vector<float> seen;
  };
  std::vector<Start> starts;
};
}  // namespace

// Small buckets (about one parameter each) make the test strict: any bucket started one layer too early
// would hold a gradient that backward still changes.
TEST(BucketedReduction, StartedBucketsHoldFinalGradients) {
  nn::ModelConfig mc;
  mc.name = "resnet20";
  mc.height = mc.width = 8;
  auto m = nn::Model::create(mc);
  m->init(7);
  nn::ParamBuffer& params = m->params();
  std::vector<int64_t> begins;
  for (const auto& p : params.specs()) begins.push_back(p.offset);
  Recorder rec;
  BucketedReduction buckets(rec, plan_buckets(begins, params.count(), 2000));
  ASSERT_GT(buckets.buckets().size(), 10u);

  Tensor x({3, 3, 8, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = float((i * 37) % 11) / 11.0f - 0.5f;
  Tensor logits = m->forward(x, true);
  Tensor dlogits(logits.shape());
  for (int64_t i = 0; i < dlogits.numel(); ++i) dlogits[i] = float((i * 13) % 7) / 7.0f - 0.4f;
  params.grads().zero();
  buckets.begin(params.grads().data(), 1.0);
  int64_t last = params.count() + 1;
  m->backward(dlogits, [&](int64_t first_final) {
    EXPECT_LE(first_final, last) << "offsets only decrease";
    last = first_final;
    buckets.grads_final(first_final);
  });
  EXPECT_EQ(last, 0) << "the last report covers the whole buffer";
  EXPECT_EQ(buckets.started(), int64_t(buckets.buckets().size())) << "backward started every bucket";
  buckets.finish();
  ASSERT_EQ(rec.starts.size(), buckets.buckets().size());
  for (size_t i = 0; i < rec.starts.size(); ++i) {
    const auto& s = rec.starts[i];
    EXPECT_EQ(s.at, params.grads().data() + buckets.buckets()[i].begin) << "bucket " << i << " out of order";
    EXPECT_EQ(std::memcmp(s.seen.data(), s.at, s.seen.size() * sizeof(float)), 0)
        << "bucket " << i << " [" << buckets.buckets()[i].begin << ", " << buckets.buckets()[i].end
        << ") changed after it was started";
  }
}

// The default of a backend that cannot overlap: buckets deferred to wait_all() and merged into the one
// call that --bucket-mb 0 makes.
TEST(Communicator, DeferredBucketsMergeIntoOneCall) {
  class Counting : public Communicator {
   public:
    const char* name() const override { return "counting"; }
    void allreduce_sum(float* data, int64_t n) override { calls.push_back({data, n}); }
    std::vector<std::pair<float*, int64_t>> calls;
  } c;
  std::vector<float> g(30, 2.0f);
  BucketedReduction buckets(c, plan_buckets({0, 10, 20}, 30, 5));
  ASSERT_EQ(buckets.buckets().size(), 3u);
  buckets.begin(g.data(), 0.5);
  buckets.grads_final(20);
  buckets.grads_final(0);
  EXPECT_TRUE(c.calls.empty()) << "nothing runs before wait_all";
  buckets.finish();
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].first, g.data());
  EXPECT_EQ(c.calls[0].second, 30);
  for (float v : g) EXPECT_EQ(v, 1.0f);  // the weight was applied once
}
