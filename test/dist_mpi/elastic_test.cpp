// The asynchronous modes' one-sided state: the sharded center adds every push exactly, the counter hands out
// every sample once, the stop flag reaches every rank (any world size 1..4).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hetrain/dist/elastic.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::dist;

namespace {
int rank_of() { int r = 0; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
int size_of() { int s = 1; MPI_Comm_size(MPI_COMM_WORLD, &s); return s; }
}  // namespace

TEST(ElasticCenter, ShardsCoverTheVectorOnce) {
  for (int64_t count : {0, 1, 7, 1000, 1001}) {
    for (int ranks : {1, 2, 3, 4, 7}) {
      int64_t next = 0;
      for (int r = 0; r < ranks; ++r) {
        int64_t first = -1, size = -1;
        ElasticCenter::shard(count, ranks, r, &first, &size);
        EXPECT_EQ(first, next);
        EXPECT_GE(size, count / ranks);
        EXPECT_LE(size, count / ranks + 1);
        next = first + size;
      }
      EXPECT_EQ(next, count);
    }
  }
}

// Deterministic pushes of small integers (exact in float whatever the order): center = initial + Σ pushes.
TEST(ElasticCenter, AccumulateAddsEveryPush) {
  const int rank = rank_of(), size = size_of();
  const int64_t n = 1003;  // not a multiple of the world size: uneven shards
  std::vector<float> initial(n);
  for (int64_t i = 0; i < n; ++i) initial[size_t(i)] = float(i % 17);
  ElasticCenter center(MPI_COMM_WORLD, n, initial.data());
  const int pushes = 25;
  std::vector<float> delta(n);
  for (int k = 0; k < pushes; ++k) {
    for (int64_t i = 0; i < n; ++i) delta[size_t(i)] = float((rank + 1) * ((i + k) % 5) - 2);
    center.add(delta.data());
    if (k % 7 == 0) {  // reads between pushes see a vector of the right size with finite values
      std::vector<float> now(n, -1e30f);
      center.read(now.data());
      EXPECT_TRUE(std::all_of(now.begin(), now.end(), [](float v) { return v > -1e29f; }));
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // every rank's pushes are complete (each add flushes)
  std::vector<float> got(n);
  center.read(got.data());
  for (int64_t i = 0; i < n; ++i) {
    double want = initial[size_t(i)];
    for (int r = 0; r < size; ++r)
      for (int k = 0; k < pushes; ++k) want += double((r + 1) * ((i + k) % 5) - 2);
    ASSERT_EQ(double(got[size_t(i)]), want) << "element " << i;
  }
  center.close();
}

// A 16-bit wire (--reduce-precision bf16|fp16): trades read the owners' 16-bit copies, pushes go through
// their inboxes and are added in FP32 by the owners, which serve while they push and while they wait in a
// collective. Small integers are exact at 16 bits and in float whatever the order: after every rank's
// pushes the FP32 center is initial + Σ pushes exactly (each sum is exact in float, whatever the order of
// the owners' additions), and each copy is that center rounded.
TEST(ElasticCenter, SixteenBitTradesAddEveryPush) {
  const int rank = rank_of(), size = size_of();
  const int64_t n = 1003;
  for (Wire wire : {Wire::BF16, Wire::FP16}) {
    SCOPED_TRACE(wire_name(wire));
    std::vector<float> initial(n);
    // i % 17 + 2^-9: exact in float through every integer sum below, but not at 16 bits from 4 up.
    for (int64_t i = 0; i < n; ++i) initial[size_t(i)] = float(i % 17) + 1.0f / 512;
    ElasticCenter center(MPI_COMM_WORLD, n, initial.data(), wire);
    std::vector<float> read(n);
    center.read_for_trade(read.data());
    // Every check below counts and reports without returning: a rank that left the test early would leave
    // the others waiting for it to serve its shard (they would stall for --stall-timeout, then fail).
    int64_t rounded = 0, wrong = 0, first_wrong = -1;
    auto check = [&](float got, float want, int64_t i) {
      if (got == want) return;
      if (wrong++ == 0) first_wrong = i, ADD_FAILURE() << "element " << i << ": got " << got << ", want " << want;
    };
    for (int64_t i = 0; i < n; ++i) {
      check(read[size_t(i)], widen_from_wire(narrow_to_wire(initial[size_t(i)], wire), wire), i);
      rounded += read[size_t(i)] != initial[size_t(i)];
    }
    EXPECT_EQ(wrong, 0) << "initial 16-bit copy, first wrong element " << first_wrong;
    EXPECT_GT(rounded, 0);  // the trade read really is 16-bit
    // No rank pushes before every rank has read the initial copies: an owner serving an early push
    // rewrites its copy under a slower rank's first read.
    MPI_Barrier(MPI_COMM_WORLD);
    // Rank r pushes 3 + 4r times: the ranks that finish first serve the others from the barrier.
    const int pushes = 3 + 4 * rank;
    std::vector<float> delta(n);
    for (int k = 0; k < pushes; ++k) {
      for (int64_t i = 0; i < n; ++i) delta[size_t(i)] = float((rank + 1) * ((i + k) % 5) - 2);
      center.push(delta.data());
    }
    MPI_Request barrier;
    MPI_Ibarrier(MPI_COMM_WORLD, &barrier);
    wait_serving(&barrier);
    std::vector<float> got(n);
    center.read(got.data());
    wrong = 0, first_wrong = -1;
    for (int64_t i = 0; i < n; ++i) {
      double want = initial[size_t(i)];
      for (int r = 0; r < size; ++r)
        for (int k = 0; k < 3 + 4 * r; ++k) want += double((r + 1) * ((i + k) % 5) - 2);
      check(got[size_t(i)], float(want), i);
      EXPECT_EQ(double(float(want)), want) << "the test's sums must be exact in float";
    }
    EXPECT_EQ(wrong, 0) << "FP32 center after every push, first wrong element " << first_wrong;
    center.read_for_trade(read.data());
    wrong = 0, first_wrong = -1;
    for (int64_t i = 0; i < n; ++i) check(read[size_t(i)], widen_from_wire(narrow_to_wire(got[size_t(i)], wire), wire), i);
    EXPECT_EQ(wrong, 0) << "16-bit copy after every push, first wrong element " << first_wrong;
    MPI_Barrier(MPI_COMM_WORLD);  // every rank's reads are done before the windows go
    center.close();
  }
}

// An FP16 push beyond ±65504 is refused before anything is sent, with the option named; an FP32 wire is the
// exact center for reads and pushes alike.
TEST(ElasticCenter, SixteenBitOverflowAndFp32Wire) {
  const int64_t n = 10;
  std::vector<float> initial(n, 1.5f), delta(n, 0.0f);
  {
    ElasticCenter center(MPI_COMM_WORLD, n, initial.data(), Wire::FP16);
    delta[3] = 1e5f;
    try {
      center.push(delta.data());
      ADD_FAILURE() << "an FP16 push of 1e5 was accepted";
    } catch (const hetrain::Error& e) {
      EXPECT_NE(e.message().find("--reduce-precision fp16"), std::string::npos) << e.message();
    }
    MPI_Barrier(MPI_COMM_WORLD);
    center.close();
  }
  ElasticCenter exact(MPI_COMM_WORLD, n, initial.data(), Wire::FP32);
  delta.assign(n, 0.001f);
  exact.push(delta.data());
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<float> a(n), b(n);
  exact.read(a.data());
  exact.read_for_trade(b.data());
  EXPECT_EQ(a, b);
  float want = 1.5f;
  for (int r = 0; r < size_of(); ++r) want += 0.001f;
  EXPECT_NEAR(a[0], want, 1e-6);
  MPI_Barrier(MPI_COMM_WORLD);
  exact.close();
}

TEST(SampleCounter, ClaimsAreDisjointAndCoverEverything) {
  const int rank = rank_of(), size = size_of();
  SampleCounter counter(MPI_COMM_WORLD, 100);
  const int claims = 40;
  std::vector<int64_t> starts;
  for (int k = 0; k < claims; ++k) {  // unequal claim sizes
    const SampleCounter::Claim c = counter.claim(rank + 1);
    EXPECT_FALSE(c.stopped);
    starts.push_back(c.first);
  }
  counter.count_update();
  std::vector<int64_t> all(size_t(claims) * size_t(size));
  MPI_Allgather(starts.data(), claims, MPI_INT64_T, all.data(), claims, MPI_INT64_T, MPI_COMM_WORLD);
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [start, end)
  int64_t total = 0;
  for (int r = 0; r < size; ++r)
    for (int k = 0; k < claims; ++k) {
      ranges.push_back({all[size_t(r * claims + k)], all[size_t(r * claims + k)] + r + 1});
      total += r + 1;
    }
  std::sort(ranges.begin(), ranges.end());
  int64_t next = 100;
  for (const auto& range : ranges) {
    EXPECT_EQ(range.first, next);
    next = range.second;
  }
  EXPECT_EQ(next, 100 + total);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(counter.claimed(), 100 + total);
  EXPECT_EQ(counter.updates(), size);
  counter.close();
}

// Every rank asks to stop at once: one stop position, the same for all, equal to the samples handed out by
// the claims that did not say stopped (a claim racing with the stop is either handed out or stopped).
TEST(SampleCounter, StopGivesOnePositionToEveryRank) {
  const int size = size_of();
  SampleCounter counter(MPI_COMM_WORLD, 0);
  int64_t handed_out = 0;
  for (int k = 0; k < 10; ++k) {
    const SampleCounter::Claim c = counter.claim(3);
    ASSERT_FALSE(c.stopped);
    handed_out += 3;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  counter.request_stop();  // every rank asks; one wins
  for (int k = 0; k < 1000 && !counter.claim(3).stopped; ++k) handed_out += 3;
  const int64_t position = counter.stop_position();
  EXPECT_EQ(counter.claimed(), position);
  std::vector<int64_t> mine = {position, handed_out}, all(2 * static_cast<size_t>(size));
  MPI_Allgather(mine.data(), 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, MPI_COMM_WORLD);
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(all[2 * size_t(r)], position);
    total += all[2 * size_t(r) + 1];
  }
  EXPECT_EQ(position, total);
  EXPECT_GE(position, 30 * size);
  MPI_Barrier(MPI_COMM_WORLD);  // nobody closes the window while another rank still reads it
  counter.close();
}

// Every rank's row of statistics sums its deltas; rows are kept apart.
TEST(SampleCounter, StatsRowsSumEachRanksDeltas) {
  const int rank = rank_of(), size = size_of();
  SampleCounter counter(MPI_COMM_WORLD, 0);
  for (int k = 0; k < 5; ++k) {
    SampleCounter::RankStats d;
    d.samples = rank + 1, d.steps = 1, d.pushes = k % 2, d.staleness = rank, d.compute_us = 10, d.wait_us = 2;
    d.comm_us = 3, d.idle_us = 4, d.finished = k == 4;
    counter.add_stats(rank, d);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<SampleCounter::RankStats> all = counter.stats();
  ASSERT_EQ(int(all.size()), size);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(all[size_t(r)].samples, 5 * (r + 1));
    EXPECT_EQ(all[size_t(r)].steps, 5);
    EXPECT_EQ(all[size_t(r)].pushes, 2);
    EXPECT_EQ(all[size_t(r)].staleness, 5 * r);
    EXPECT_EQ(all[size_t(r)].compute_us, 50);
    EXPECT_EQ(all[size_t(r)].wait_us, 10);
    EXPECT_EQ(all[size_t(r)].comm_us, 15);
    EXPECT_EQ(all[size_t(r)].idle_us, 20);
    EXPECT_EQ(all[size_t(r)].finished, 1);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  counter.close();
}

// The settled position: the claimed count, held back by every leader's oldest unpushed claim, unknown
// (-1) while a leader is between begin_claim() and claimed_at().
TEST(SampleCounter, SettledPositionIsTheOldestUnpushedClaim) {
  const int rank = rank_of(), size = size_of();
  SampleCounter counter(MPI_COMM_WORLD, 1000);
  EXPECT_EQ(counter.settled_position(), 1000);  // nothing claimed, nothing pending
  MPI_Barrier(MPI_COMM_WORLD);
  // Ranks claim in rank order, 10 samples each: rank r at 1000 + 10 r; each keeps its claim unpushed.
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      counter.begin_claim(rank);
      const SampleCounter::Claim c = counter.claim(10);
      counter.claimed_at(rank, c.first);
      EXPECT_EQ(c.first, 1000 + 10 * r);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  EXPECT_EQ(counter.settled_position(), 1000);  // rank 0's claim is not pushed
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) counter.pushed(0);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(counter.settled_position(), 1010);  // rank 1's claim (or, alone, the count)
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) counter.begin_claim(rank);  // a leader in the middle of claiming
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(counter.settled_position(), -1);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) counter.claimed_at(rank, counter.claim(10).first);
  counter.pushed(rank);  // every claim so far in the center
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) {
    EXPECT_EQ(counter.settled_position(), 1000 + 10 * size + 10);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  counter.close();
}
