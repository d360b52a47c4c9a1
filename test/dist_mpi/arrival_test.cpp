// The per-step agreement and its stall watch (hetrain/dist/arrival.hpp), on whatever ranks the test runs
// with. A stall ends the job with MPI_Abort, so these tests pin what must NOT be taken for a stall; the
// naming itself is pinned end to end (test/e2e/dist_stall.sh).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "hetrain/dist/arrival.hpp"

using namespace hetrain::dist;

namespace {
int rank_of(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}
int size_of(MPI_Comm c) {
  int n = 0;
  MPI_Comm_size(c, &n);
  return n;
}
std::vector<std::string> hosts(MPI_Comm c) { return std::vector<std::string>(size_t(size_of(c)), "here"); }
void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }
}  // namespace

TEST(StepArrival, SumsTheValuesOfEveryRank) {
  StepArrival arrival(MPI_COMM_WORLD, hosts(MPI_COMM_WORLD), 30);
  const int n = size_of(MPI_COMM_WORLD), me = rank_of(MPI_COMM_WORLD);
  for (int64_t step = 0; step < 3; ++step) {
    std::vector<double> v = {1.0, double(me), double(step)};
    arrival.arrive(step, v);
    arrival.step_done();
    EXPECT_EQ(v[0], n);
    EXPECT_EQ(v[1], n * (n - 1) / 2.0);
    EXPECT_EQ(v[2], double(n) * double(step));
  }
}

// One-off set-up (kernel compilation, autotuning) makes a first step slow: no stall. Rank 1 arrives 1.5 s
// late under a 0.5 s timeout; a stall would abort the whole test binary.
TEST(StepArrival, FirstStepIsNotJudgedByTheTimeout) {
  StepArrival arrival(MPI_COMM_WORLD, hosts(MPI_COMM_WORLD), 0.5);
  ASSERT_LT(1.5, StepArrival::kFirstStepFactor * 0.5);
  std::vector<double> v = {1.0};
  if (rank_of(MPI_COMM_WORLD) == 1) sleep_s(1.5);
  arrival.arrive(0, v);
  arrival.step_done();
  EXPECT_EQ(v[0], size_of(MPI_COMM_WORLD));
  v = {1.0};
  arrival.arrive(1, v);  // the second step, on time
  arrival.step_done();
  EXPECT_EQ(v[0], size_of(MPI_COMM_WORLD));
}

// After arriving, a rank that waits (and says so) is alive however long it waits: here the last rank
// keeps the others waiting 1.5 s in the step's later reduction under a 0.5 s timeout, calling keep_alive()
// as a rank waiting in another reduction does.
TEST(StepArrival, WaitingRanksAreNotTakenForSilentOnes) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  {
    StepArrival arrival(comm, hosts(comm), 0.5);
    const int n = size_of(comm), me = rank_of(comm);
    for (int64_t step = 0; step < 2; ++step) {  // step 0 is set-up; step 1 is judged by the timeout
      std::vector<double> v = {1.0};
      arrival.arrive(step, v);
      if (step == 1 && me == n - 1) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
        while (std::chrono::steady_clock::now() < until) {
          arrival.keep_alive();
          sleep_s(0.005);
        }
      }
      double total = 1.0;
      MPI_Request r;
      MPI_Iallreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, comm, &r);
      arrival.wait(&r, 1);
      arrival.step_done();
      EXPECT_EQ(total, n);
    }
  }
  MPI_Comm_free(&comm);
}
