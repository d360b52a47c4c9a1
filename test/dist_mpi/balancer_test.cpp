// The MPI Balancer: one plan on every rank, convergence with synthetic per-rank timings.
#include <gtest/gtest.h>
#include <mpi.h>

#include <numeric>
#include <vector>

#include "hetrain/dist/balancer.hpp"
#include "hetrain/dist/world.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::dist;

namespace {
// True when every rank holds the same split.
bool same_everywhere(MPI_Comm comm, const std::vector<int64_t>& split) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<int64_t> all(split.size() * size_t(size));
  MPI_Allgather(split.data(), int(split.size()), MPI_INT64_T, all.data(), int(split.size()), MPI_INT64_T, comm);
  for (int r = 1; r < size; ++r)
    if (!std::equal(split.begin(), split.end(), all.begin() + long(r * split.size()))) return false;
  return true;
}
}  // namespace

TEST(Balancer, OnePlanEverywhereAndConvergence) {
  World& w = World::init(nullptr, nullptr);
  BalanceConfig c;
  c.mode = BalanceMode::Dynamic;
  c.rebalance_every = 5;
  c.calibration_steps = 2;
  const int64_t B = 120;
  Balancer bal(w.comm(), B, c);
  const int n = w.size();
  int mismatches = 0, changes = 0;
  for (int64_t step = 0; step < 40; ++step) {
    const int64_t b = bal.local_batch();
    EXPECT_EQ(bal.local_offset(), std::accumulate(bal.split().begin(), bal.split().begin() + w.rank(), int64_t(0)));
    bal.record(b, double(b) * double(w.rank() + 1) * 1e-3);  // rank r is r+1 times slower per sample
    changes += bal.update(step);
    mismatches += !same_everywhere(w.comm(), bal.split());
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(std::accumulate(bal.split().begin(), bal.split().end(), int64_t(0)), B);
  // Ideal: B / Σ_r 1/(r+1) ms per step; the plan must reach 95% of it.
  double total_speed = 0, worst = 0;
  for (int r = 0; r < n; ++r) {
    total_speed += 1.0 / (r + 1);
    worst = std::max(worst, double(bal.split()[r]) * (r + 1) * 1e-3);
  }
  EXPECT_GE(1e-3 * double(B) / total_speed / worst, 0.95) << bal.describe(39);
  if (n > 1) {
    EXPECT_GE(changes, 2);  // perturbed calibration split, then the fitted one
    EXPECT_GT(bal.split()[0], bal.split()[n - 1]);
    EXPECT_GT(bal.predicted_uniform_seconds(), bal.predicted_seconds());
  }
  EXPECT_EQ(int(bal.speeds().size()), n);
  if (w.rank() == 0) std::printf("%s\n", bal.describe(39).c_str());
}

TEST(Balancer, NoneStaysUniformWithoutCollectives) {
  World& w = World::init(nullptr, nullptr);
  BalanceConfig c;
  c.mode = BalanceMode::None;
  Balancer bal(w.comm(), 10, c);
  std::vector<int64_t> uniform = uniform_split(w.size(), 10, {});
  for (int64_t step = 0; step < 20; ++step) {
    bal.record(bal.local_batch(), 0.001 * double(w.rank() + 1));
    EXPECT_FALSE(bal.update(step));
  }
  EXPECT_EQ(bal.split(), uniform);
}

TEST(Balancer, BadConfigThrowsOnEveryRankBeforeAnyCollective) {
  World& w = World::init(nullptr, nullptr);
  BalanceConfig c;
  c.caps = std::vector<int64_t>(size_t(w.size()) + 1, 8);  // wrong length
  EXPECT_THROW(Balancer(w.comm(), 16, c), Error);
  c.caps = {1};
  EXPECT_THROW(Balancer(w.comm(), int64_t(w.size()) + 1, c), Error);  // Σ caps < B
  c.caps = {};
  EXPECT_THROW(Balancer(w.comm(), 0, c), Error);
}
