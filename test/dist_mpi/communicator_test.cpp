// Weighted gradient reduction: exact Σ_r (b_r/B)·x_r, zero-weight ranks included; chunked allreduce; the
// 16-bit wire's exact rounding, identical on every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hetrain/dist/buckets.hpp"
#include "hetrain/dist/communicator.hpp"
#include "hetrain/dist/world.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::dist;

namespace {
// Local batches with B = 32 (a power of two, so b_r/B and every product and sum below are exact floats).
std::vector<int64_t> shares(int n) {
  switch (n) {
    case 1: return {32};
    case 2: return {32, 0};
    case 3: return {5, 0, 27};
    default: return {5, 0, 17, 10};
  }
}
float value(int rank, int64_t i) { return float((i * 7 + rank * 3) % 61); }  // small integers
}  // namespace

TEST(MpiCommunicator, WeightedAllreduceIsExact) {
  World& w = World::init(nullptr, nullptr);
  ASSERT_LE(w.size(), 4) << "this test is written for 1..4 ranks";
  std::vector<int64_t> b = shares(w.size());
  for (int64_t max_chunk : {int64_t(0), int64_t(7)}) {  // one call, and many chunks of 7
    MpiCommunicator comm(w.comm(), max_chunk);
    EXPECT_STREQ(comm.name(), "mpi");
    const int64_t n = 1001;
    std::vector<float> g(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      g[i] = b[w.rank()] == 0 ? std::numeric_limits<float>::quiet_NaN() : value(w.rank(), i);  // b=0: garbage
    comm.weighted_allreduce(g.data(), n, double(b[w.rank()]) / 32.0);
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) {
      double expect = 0;
      for (int r = 0; r < w.size(); ++r) expect += double(value(r, i)) * double(b[r]) / 32.0;
      wrong += double(g[i]) != expect;
    }
    EXPECT_EQ(wrong, 0) << "max_chunk " << max_chunk;
  }
}

TEST(MpiCommunicator, AllreduceSumAndEmptyBuffer) {
  World& w = World::init(nullptr, nullptr);
  MpiCommunicator comm(w.comm());
  std::vector<float> x = {1.0f, float(w.rank())};
  comm.allreduce_sum(x.data(), 2);
  EXPECT_EQ(x[0], float(w.size()));
  EXPECT_EQ(x[1], float(w.size() * (w.size() - 1) / 2));
  EXPECT_NO_THROW(comm.allreduce_sum(nullptr, 0));
}

// NCCL only when every rank trains on a GPU and NCCL is built in; a single CPU rank turns the whole job
// to MPI (its GPU ranks then stage through host memory).
TEST(GradientCommunicator, ChoiceFollowsEveryRanksDevice) {
  using hetrain::Device;
  EXPECT_EQ(choose_reduction({Device::CUDA, Device::CUDA}, true), Reduction::Nccl);
  EXPECT_EQ(choose_reduction({Device::CUDA, Device::CPU, Device::CUDA}, true), Reduction::Mpi);
  EXPECT_EQ(choose_reduction({Device::CPU}, true), Reduction::Mpi);
  EXPECT_EQ(choose_reduction({Device::CUDA, Device::CUDA}, false), Reduction::Mpi);
  EXPECT_STREQ(reduction_name(Reduction::Nccl), "nccl");
}

// Collective construction on a CPU job gives the MPI communicator, and it reduces exactly.
TEST(GradientCommunicator, CpuJobGetsMpiAndReducesExactly) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto comm = make_gradient_communicator(MPI_COMM_WORLD, hetrain::Device::CPU, false);
  EXPECT_STREQ(comm->name(), "mpi");
  std::vector<float> x(1000);
  for (int64_t i = 0; i < 1000; ++i) x[i] = value(rank, i);
  const auto b = shares(size);
  comm->weighted_allreduce(x.data(), 1000, double(b[rank]) / 32.0);
  for (int64_t i = 0; i < 1000; ++i) {
    float want = 0;
    for (int r = 0; r < size; ++r) want += float(b[r]) / 32.0f * value(r, i);
    ASSERT_EQ(x[i], want) << "element " << i;
  }
}

// ---------------------------------------------------------------- started buckets, hierarchical reduction
namespace {
// Pretend nodes of two consecutive ranks (0-1, 2-3): the hierarchical path with more than one "node" on
// one machine. Every value here is exact in fp32, so every order of summation gives the same bits.
MPI_Comm pretend_nodes_of_two(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm out = MPI_COMM_NULL;
  MPI_Comm_split(comm, rank / 2, rank, &out);
  return out;
}

int64_t wrong_elements(const std::vector<float>& g, int size, const std::vector<int64_t>& b) {
  int64_t wrong = 0;
  for (int64_t i = 0; i < int64_t(g.size()); ++i) {
    double expect = 0;
    for (int r = 0; r < size; ++r) expect += double(value(r, i)) * double(b[r]) / 32.0;
    wrong += double(g[size_t(i)]) != expect;
  }
  return wrong;
}
}  // namespace

// Buckets started in backward's order (from the end of the buffer), progressed, then waited for: the same
// exact weighted sum as one blocking call, flat and hierarchical, in one piece and in chunks of 7.
TEST(MpiCommunicator, StartedBucketsAreExactFlatAndHierarchical) {
  World& w = World::init(nullptr, nullptr);
  const std::vector<int64_t> b = shares(w.size());
  MPI_Comm nodes = pretend_nodes_of_two(w.comm());
  for (bool tiered : {false, true}) {
    for (int64_t max_chunk : {int64_t(0), int64_t(7)}) {
      for (bool polite : {false, true}) {
        MpiCommunicator comm(w.comm(), max_chunk, polite, tiered ? nodes : MPI_COMM_NULL);
        EXPECT_TRUE(comm.overlaps());
        EXPECT_EQ(comm.hierarchical(), tiered);
        if (tiered) {
          EXPECT_EQ(comm.nodes(), (w.size() + 1) / 2);
        }
        const int64_t n = 1001;
        std::vector<float> g(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          g[size_t(i)] = b[w.rank()] == 0 ? std::numeric_limits<float>::quiet_NaN() : value(w.rank(), i);
        BucketedReduction buckets(comm, plan_buckets({0, 100, 250, 251, 600, 990}, n, 120));
        buckets.begin(g.data(), double(b[w.rank()]) / 32.0);
        for (int64_t final_from : {990, 600, 300, 251}) {  // as backward would report
          buckets.grads_final(final_from);
          buckets.progress();
        }
        buckets.finish();
        EXPECT_EQ(wrong_elements(g, w.size(), b), 0) << "hierarchical " << tiered << ", max_chunk " << max_chunk;
        // The blocking call of --bucket-mb 0 on the same communicator.
        for (int64_t i = 0; i < n; ++i)
          g[size_t(i)] = b[w.rank()] == 0 ? std::numeric_limits<float>::quiet_NaN() : value(w.rank(), i);
        comm.weighted_allreduce(g.data(), n, double(b[w.rank()]) / 32.0);
        EXPECT_EQ(wrong_elements(g, w.size(), b), 0) << "blocking, hierarchical " << tiered;
      }
    }
  }
  MPI_Comm_free(&nodes);
}

// The automatic choice: on one machine (one node) the reduction stays flat; forced on, it is hierarchical.
TEST(GradientCommunicator, HierarchyFollowsTheNodes) {
  World& w = World::init(nullptr, nullptr);
  auto flat = make_gradient_communicator(w.comm(), hetrain::Device::CPU, false, Hierarchy::Auto, w.node_comm());
  EXPECT_STREQ(flat->name(), "mpi");
  auto forced = make_gradient_communicator(w.comm(), hetrain::Device::CPU, false, Hierarchy::On, w.node_comm());
  EXPECT_STREQ(forced->name(), "mpi (hierarchical over 1 node)");
  MPI_Comm nodes = pretend_nodes_of_two(w.comm());
  auto pretend = make_gradient_communicator(w.comm(), hetrain::Device::CPU, false, Hierarchy::Auto, nodes);
  EXPECT_STREQ(pretend->name(), w.size() > 2 ? "mpi (hierarchical over 2 nodes)" : "mpi");
  MPI_Comm_free(&nodes);
}

// ---------------------------------------------------------------- 16 bits on the wire (--reduce-precision)
namespace {
// Values that 16 bits cannot hold exactly, so every rounding shows.
float inexact(int rank, int64_t i) { return float((i * 7 + rank * 3) % 61 + 1) / 7.0f * (i % 2 ? -1.0f : 1.0f); }

// What every rank must end with: each group's FP32 sum of its ranks' weighted values (a group is one rank
// when flat, a pretend node when hierarchical; two terms sum alike in either order) rounded to the wire,
// the groups' values summed in FP32 in group order, rounded once more and widened.
float expected_16bit(int64_t i, int size, const std::vector<int64_t>& b, int group_size, Wire wire) {
  float total = 0.0f;
  for (int first = 0; first < size; first += group_size) {
    float group = 0.0f;
    for (int r = first; r < std::min(size, first + group_size); ++r) {
      const float weighted = b[r] == 0 ? 0.0f : inexact(r, i) * float(double(b[r]) / 32.0);
      group += weighted;
    }
    total += widen_from_wire(narrow_to_wire(group, wire), wire);
  }
  return widen_from_wire(narrow_to_wire(total, wire), wire);
}

int64_t differ_16bit(const std::vector<float>& g, int size, const std::vector<int64_t>& b, int group_size, Wire wire) {
  int64_t differ = 0;
  for (int64_t i = 0; i < int64_t(g.size()); ++i) {
    const float want = expected_16bit(i, size, b, group_size, wire);
    differ += std::memcmp(&g[size_t(i)], &want, sizeof want) != 0;
  }
  return differ;
}

// Every rank's buffer has the same bits as rank 0's.
bool same_on_every_rank(MPI_Comm comm, const std::vector<float>& g) {
  std::vector<float> first = g;
  MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, comm);
  int same = std::memcmp(first.data(), g.data(), g.size() * sizeof(float)) == 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, comm);
  return same != 0;
}
}  // namespace

// Blocking and bucketed, flat and hierarchical, polite or not: the exact bits of "round each contribution,
// sum in FP32, round once", identical on every rank, within bf16/fp16's rounding of the FP32 result.
TEST(MpiCommunicator, SixteenBitWireRoundsOnceAndAgrees) {
  World& w = World::init(nullptr, nullptr);
  const std::vector<int64_t> b = shares(w.size());
  MPI_Comm nodes = pretend_nodes_of_two(w.comm());
  const int64_t n = 1003;  // not a multiple of the ranks: the last block is padded
  for (Wire wire : {Wire::BF16, Wire::FP16}) {
    for (bool tiered : {false, true}) {
      for (bool polite : {false, true}) {
        MpiCommunicator comm(w.comm(), 0, polite, tiered ? nodes : MPI_COMM_NULL);
        EXPECT_TRUE(comm.carries(wire));
        const int group = tiered ? 2 : 1;
        const std::string where = std::string(wire_name(wire)) + (tiered ? ", hierarchical" : ", flat") +
                                  (polite ? ", polite" : "");
        auto fill = [&](std::vector<float>& g) {
          for (int64_t i = 0; i < n; ++i)
            g[size_t(i)] = b[w.rank()] == 0 ? std::numeric_limits<float>::quiet_NaN() : inexact(w.rank(), i);
        };
        std::vector<float> g(static_cast<size_t>(n));
        fill(g);
        comm.weighted_allreduce(g.data(), n, double(b[w.rank()]) / 32.0, wire);
        EXPECT_EQ(differ_16bit(g, w.size(), b, group, wire), 0) << "blocking, " << where;
        EXPECT_TRUE(same_on_every_rank(w.comm(), g)) << "blocking, " << where;
        // Against the FP32 sum: at most a few steps of the 16-bit format apart.
        const double step = wire == Wire::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
        int64_t far = 0;
        for (int64_t i = 0; i < n; ++i) {
          double exact = 0;
          for (int r = 0; r < w.size(); ++r) exact += double(inexact(r, i)) * double(b[r]) / 32.0;
          far += std::fabs(double(g[size_t(i)]) - exact) > 3 * step * std::max(1.0, std::fabs(exact));
        }
        EXPECT_EQ(far, 0) << where;

        fill(g);
        BucketedReduction buckets(comm, plan_buckets({0, 100, 250, 251, 600, 990}, n, 120), wire);
        buckets.begin(g.data(), double(b[w.rank()]) / 32.0);
        for (int64_t final_from : {990, 600, 300, 251}) {
          buckets.grads_final(final_from);
          buckets.progress();
        }
        buckets.finish();
        EXPECT_EQ(differ_16bit(g, w.size(), b, group, wire), 0) << "buckets, " << where;
        EXPECT_TRUE(same_on_every_rank(w.comm(), g)) << "buckets, " << where;
      }
    }
  }
  MPI_Comm_free(&nodes);
}

// A backend without a 16-bit path says so instead of sending FP32 under a 16-bit name.
TEST(Communicator, SixteenBitsRefusedWhereNotCarried) {
  class Fp32Only : public Communicator {
   public:
    const char* name() const override { return "fp32-only"; }
    void allreduce_sum(float*, int64_t) override {}
  } c;
  std::vector<float> g(4, 1.0f);
  EXPECT_FALSE(c.carries(Wire::BF16));
  EXPECT_THROW(c.weighted_allreduce(g.data(), 4, 0.5, Wire::BF16), hetrain::Error);
  EXPECT_THROW(BucketedReduction(c, plan_buckets({0}, 4, 0), Wire::FP16), hetrain::Error);
  EXPECT_NO_THROW(c.weighted_allreduce(g.data(), 4, 0.5, Wire::FP32));
}

// ---------------------------------------------------------------- a GPU rank's staging, with host memory
namespace {
// Stands in for CUDA's pinned memory and copies, so the staging logic runs on machines without a GPU.
class HostMemoryStaging : public HostStaging {
 public:
  float* alloc(int64_t n) override { return new float[size_t(n)]; }
  void release(float* host) noexcept override { delete[] host; }
  void to_host(float* host, const float* device, int64_t n) override { std::copy_n(device, n, host); }
  void to_device(float* device, const float* host, int64_t n) override { std::copy_n(host, n, device); }
};
}  // namespace

// A mixed job: rank 1 takes the host-staged path of a GPU rank, the others reduce on the host, all with
// buckets started during backward, flat and hierarchical, FP32 and 16 bits. Every rank must issue the same
// started collectives: a staged rank that merged its buckets into one blocking allreduce hung here.
TEST(HostStagedCommunicator, BucketsMatchTheCpuRanks) {
  World& w = World::init(nullptr, nullptr);
  const std::vector<int64_t> b = shares(w.size());
  MPI_Comm nodes = pretend_nodes_of_two(w.comm());
  const int64_t n = 1001;
  for (bool tiered : {false, true}) {
    for (Wire wire : {Wire::FP32, Wire::BF16}) {
      std::unique_ptr<Communicator> comm =
          std::make_unique<MpiCommunicator>(w.comm(), 0, false, tiered ? nodes : MPI_COMM_NULL);
      if (w.rank() == 1)
        comm = std::make_unique<HostStagedCommunicator>(std::move(comm), std::make_unique<HostMemoryStaging>());
      EXPECT_TRUE(comm->overlaps());
      for (int step = 0; step < 2; ++step) {  // the second step reuses the staging buffers
        std::vector<float> g(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          g[size_t(i)] = b[w.rank()] == 0 ? std::numeric_limits<float>::quiet_NaN() : inexact(w.rank(), i);
        BucketedReduction buckets(*comm, plan_buckets({0, 100, 250, 251, 600, 990}, n, 120), wire);
        buckets.begin(g.data(), double(b[w.rank()]) / 32.0);
        for (int64_t final_from : {990, 600, 300, 251}) {
          buckets.grads_final(final_from);
          buckets.progress();
        }
        buckets.finish();
        const std::string where = std::string(wire_name(wire)) + (tiered ? ", hierarchical" : ", flat");
        EXPECT_TRUE(same_on_every_rank(w.comm(), g)) << where;
        if (wire == Wire::FP32) {
          double worst = 0;
          for (int64_t i = 0; i < n; ++i) {
            double exact = 0;
            for (int r = 0; r < w.size(); ++r) exact += double(inexact(r, i)) * double(b[r]) / 32.0;
            worst = std::max(worst, std::fabs(double(g[size_t(i)]) - exact));
          }
          EXPECT_LT(worst, 1e-5) << where;
        } else {
          EXPECT_EQ(differ_16bit(g, w.size(), b, tiered ? 2 : 1, wire), 0) << where;
        }
      }
    }
  }
  MPI_Comm_free(&nodes);
}
