// Weighted gradient reduction: exact Σ_r (b_r/B)·x_r, zero-weight ranks included; chunked allreduce.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <limits>
#include <vector>

#include "hetrain/dist/buckets.hpp"
#include "hetrain/dist/communicator.hpp"
#include "hetrain/dist/world.hpp"

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
