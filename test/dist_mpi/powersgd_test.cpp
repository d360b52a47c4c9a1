// PowerSGD (hetrain/dist/powersgd.hpp) on 1–4 ranks: what travels as factors, that a gradient within the
// rank comes back whole, that every rank ends with the same bits, that the error feedback owes exactly what
// the approximation missed, and that over steps the applied updates catch up with the true gradient.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "hetrain/dist/powersgd.hpp"
#include "hetrain/dist/world.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::dist;

namespace {
// A conv weight [8, 4, 3, 3] (8 × 36: compressed at rank 2), its bias [8], a small dense weight [3, 4]
// (sent whole: rank 2 would not halve it) and a batch-norm scale [5].
const std::vector<PowerSgd::Param> kParams = {{0, {8, 4, 3, 3}}, {288, {8}}, {296, {3, 4}}, {308, {5}}};
constexpr int64_t kCount = 313;

// Weights b_r/B with B = 32 (exact in float), one rank with none.
double weight_of(int rank, int size) {
  static const std::vector<std::vector<int>> shares = {{32}, {32, 0}, {5, 0, 27}, {5, 0, 17, 10}};
  return double(shares[size_t(size - 1)][size_t(rank)]) / 32.0;
}

// This rank's gradient: the conv weight is u_r·vᵀ (rank one), everything else small integers.
std::vector<float> gradient(int rank) {
  std::vector<float> g(kCount);
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t j = 0; j < 36; ++j) g[size_t(i * 36 + j)] = float(i + 1 + rank) * float(j % 7 - 3);
  for (int64_t i = 288; i < kCount; ++i) g[size_t(i)] = float((i * 5 + rank) % 11);
  return g;
}

bool same_on_every_rank(MPI_Comm comm, const std::vector<float>& v) {
  std::vector<float> first = v;
  MPI_Bcast(first.data(), int(first.size()), MPI_FLOAT, 0, comm);
  int same = std::memcmp(first.data(), v.data(), v.size() * sizeof(float)) == 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, comm);
  return same != 0;
}
}  // namespace

TEST(PowerSgd, OptionAndPlan) {
  EXPECT_EQ(parse_compress_rank("none"), 0);
  EXPECT_EQ(parse_compress_rank("powersgd:4"), 4);
  for (const char* bad : {"powersgd", "powersgd:0", "powersgd:-1", "powersgd:x", "topk:4", "powersgd:99999"})
    EXPECT_THROW(parse_compress_rank(bad), hetrain::Error) << bad;
  PowerSgd p(kParams, kCount, 2, 1);
  EXPECT_EQ(p.compressed_matrices(), 1);
  EXPECT_EQ(p.compressed_floats(), 288);
  EXPECT_EQ(p.floats_sent(), (8 + 12 + 5) + 8 * 2 + 36 * 2);  // whole ranges + P + Q
  EXPECT_EQ(p.q().size(), size_t(36 * 2));
  EXPECT_EQ(p.parameters(), 8 * 36 + 8 + 12 + 5);
  EXPECT_THROW(PowerSgd({{0, {8, 36}}}, 200, 2, 1), hetrain::Error);              // past the buffer's end
  EXPECT_THROW(PowerSgd({{0, {8, 36}}, {100, {8}}}, 400, 2, 1), hetrain::Error);  // overlapping
}

// Σ_r b_r/B·g_r has rank one here: after two steps (the first Q is random, the second is warm) the
// factored sum equals the weighted sum within float rounding; the whole parameters are exact every step.
TEST(PowerSgd, LowRankSumComesBackWholeAndAlike) {
  World& w = World::init(nullptr, nullptr);
  MpiCommunicator comm(w.comm());
  PowerSgd p(kParams, kCount, 2, 7);
  std::vector<double> want(kCount, 0.0);
  for (int r = 0; r < w.size(); ++r) {
    const std::vector<float> g = gradient(r);
    for (int64_t i = 0; i < kCount; ++i) want[size_t(i)] += double(g[size_t(i)]) * weight_of(r, w.size());
  }
  for (int step = 0; step < 2; ++step) {
    std::vector<float> g = gradient(w.rank());
    p.reduce(comm, g.data(), weight_of(w.rank(), w.size()));
    EXPECT_TRUE(same_on_every_rank(w.comm(), g)) << "step " << step;
    int64_t whole_wrong = 0;
    for (int64_t i = 288; i < kCount; ++i) whole_wrong += double(g[size_t(i)]) != want[size_t(i)];
    EXPECT_EQ(whole_wrong, 0) << "step " << step;
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < 288; ++i) {
      worst = std::max(worst, std::fabs(double(g[size_t(i)]) - want[size_t(i)]));
      scale = std::max(scale, std::fabs(want[size_t(i)]));
    }
    EXPECT_LT(worst, 1e-5 * scale) << "step " << step;
  }
}

// nn::ParamBuffer leaves zero padding between parameters: PowerSGD neither sends nor writes it, and the
// parameters around a gap come back as they do without one.
TEST(PowerSgd, PaddingBetweenParametersIsLeftAlone) {
  World& w = World::init(nullptr, nullptr);
  MpiCommunicator comm(w.comm());
  constexpr int64_t kGap = 32, kPadded = kCount + kGap;
  std::vector<PowerSgd::Param> padded = kParams;
  for (size_t i = 1; i < padded.size(); ++i) padded[i].offset += kGap;  // a gap after the conv weight
  PowerSgd tight(kParams, kCount, 2, 7), gapped(padded, kPadded, 2, 7);
  EXPECT_EQ(gapped.parameters(), tight.parameters());
  EXPECT_EQ(gapped.floats_sent(), tight.floats_sent());
  for (int step = 0; step < 2; ++step) {
    std::vector<float> g = gradient(w.rank()), h(kPadded, 0.0f);
    std::copy(g.begin(), g.begin() + 288, h.begin());
    std::copy(g.begin() + 288, g.end(), h.begin() + 288 + kGap);
    tight.reduce(comm, g.data(), weight_of(w.rank(), w.size()));
    gapped.reduce(comm, h.data(), weight_of(w.rank(), w.size()));
    for (int64_t i = 0; i < kGap; ++i) ASSERT_EQ(h[size_t(288 + i)], 0.0f) << "step " << step << ", gap float " << i;
    EXPECT_EQ(std::memcmp(h.data(), g.data(), 288 * sizeof(float)), 0) << "step " << step;
    EXPECT_EQ(std::memcmp(h.data() + 288 + kGap, g.data() + 288, size_t(kCount - 288) * sizeof(float)), 0);
  }
}

// A full-rank gradient, the same every step: each step's error feedback owes exactly what its
// approximation missed (Σ_r e_r = Σ_r M_r − A), and the mean of the applied updates converges to the
// true weighted sum G although each step sends only rank 1 of it.
TEST(PowerSgd, ErrorFeedbackCatchesUp) {
  World& w = World::init(nullptr, nullptr);
  MpiCommunicator comm(w.comm());
  PowerSgd p(kParams, kCount, 1, 3);
  auto full_rank = [](int rank) {
    std::vector<float> g(kCount);
    for (int64_t i = 0; i < kCount; ++i) g[size_t(i)] = std::sin(float(i * (rank + 2)) * 0.37f);
    return g;
  };
  std::vector<double> G(kCount, 0.0);
  for (int r = 0; r < w.size(); ++r) {
    const std::vector<float> g = full_rank(r);
    for (int64_t i = 0; i < kCount; ++i) G[size_t(i)] += double(g[size_t(i)]) * weight_of(r, w.size());
  }
  std::vector<double> applied(kCount, 0.0);
  double first_gap = 0, last_gap = 0;
  const int steps = 60;
  for (int step = 1; step <= steps; ++step) {
    std::vector<float> owed_before = p.error();
    MPI_Allreduce(MPI_IN_PLACE, owed_before.data(), int(kCount), MPI_FLOAT, MPI_SUM, w.comm());
    std::vector<float> g = full_rank(w.rank());
    p.reduce(comm, g.data(), weight_of(w.rank(), w.size()));
    std::vector<float> owed = p.error();
    MPI_Allreduce(MPI_IN_PLACE, owed.data(), int(kCount), MPI_FLOAT, MPI_SUM, w.comm());
    // Σ M_r = G + Σ e_r(before); the new Σ e_r must equal Σ M_r − A (A is in g now).
    double worst = 0;
    for (int64_t i = 0; i < 288; ++i)
      worst = std::max(worst, std::fabs(G[size_t(i)] + owed_before[size_t(i)] - g[size_t(i)] - owed[size_t(i)]));
    EXPECT_LT(worst, 1e-4) << "step " << step;
    double gap = 0, norm = 0;
    for (int64_t i = 0; i < 288; ++i) {
      applied[size_t(i)] += g[size_t(i)];
      gap += std::pow(applied[size_t(i)] / step - G[size_t(i)], 2);
      norm += G[size_t(i)] * G[size_t(i)];
    }
    gap = std::sqrt(gap / norm);
    if (step == 1) first_gap = gap;
    last_gap = gap;
  }
  EXPECT_GT(first_gap, 0.3) << "rank 1 of a full-rank 8×36 matrix should miss much of it in one step";
  EXPECT_LT(last_gap, 0.1 * first_gap) << "the mean update does not catch up with the gradient";
}

// Each rank's error stays in the units of its weighted gradient b_r/B·g_r, whatever its share. With the
// same full-rank gradient on every rank and every step (what i.i.d. mini-batches give on average), rank r
// owes its share of what all owe, e_r = b_r/B·Σ_s e_s, which error feedback keeps bounded; after the shares
// change (a rebalance) it owes its old share of the debt so far plus its new share of what follows. So no
// rank owes more than twice the largest total owed, a zero-sample rank included. Taking A/ranks from every
// rank instead made a rank with more than 1/ranks owe (b_r/B − 1/ranks)·A more each step and the others
// less: errors that grow without bound and cancel.
TEST(PowerSgd, ErrorStaysInTheUnitsOfItsShare) {
  World& w = World::init(nullptr, nullptr);
  MpiCommunicator comm(w.comm());
  PowerSgd p(kParams, kCount, 1, 5);
  std::vector<float> same(kCount);
  for (int64_t i = 0; i < kCount; ++i) same[size_t(i)] = std::cos(float(i * 3) * 0.29f);
  // The second phase reverses the shares: the rank that had none gets the most.
  auto weight = [&](bool rebalanced) {
    return weight_of(rebalanced ? w.size() - 1 - w.rank() : w.rank(), w.size());
  };
  double largest_total = 0;
  for (int step = 1; step <= 240; ++step) {
    const bool rebalanced = step > 120;
    std::vector<float> g = same;
    p.reduce(comm, g.data(), weight(rebalanced));
    std::vector<float> total = p.error();
    MPI_Allreduce(MPI_IN_PLACE, total.data(), int(kCount), MPI_FLOAT, MPI_SUM, w.comm());
    double mine = 0;
    for (int64_t i = 0; i < 288; ++i) {
      largest_total = std::max(largest_total, std::fabs(double(total[size_t(i)])));
      mine = std::max(mine, std::fabs(double(p.error()[size_t(i)])));
    }
    MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_DOUBLE, MPI_MAX, w.comm());
    ASSERT_LE(mine, 2.0 * largest_total + 1e-5) << "step " << step << (rebalanced ? ", after the rebalance" : "");
  }
  EXPECT_GT(largest_total, 0.1) << "rank 1 of a full-rank matrix should owe something";
}

// The error of the approximation falls with R, and R = the rank of the sum reproduces it to the float floor
// in one step (P = M·Q spans M's columns for a random Q): a 16 × 64 gradient of rank 6 with singular values
// 1, 1/2, …, 1/32, one step from the first Q.
TEST(PowerSgd, ApproximationErrorFallsWithRank) {
  World& w = World::init(nullptr, nullptr);
  MpiCommunicator comm(w.comm());
  constexpr int64_t kRows = 16, kCols = 64, kRank = 6;
  std::vector<double> G(size_t(kRows * kCols), 0.0);
  for (int64_t k = 0; k < kRank; ++k)
    for (int64_t i = 0; i < kRows; ++i)
      for (int64_t j = 0; j < kCols; ++j)  // near-orthogonal factors, scaled by 2^-k
        G[size_t(i * kCols + j)] += std::ldexp(1.0, -int(k)) * std::sin(0.7 * double((k + 1) * (i + 1))) *
                                    std::cos(0.3 * double((k + 2) * (j + 1)) + double(k));
  double norm = 0;
  for (double v : G) norm += v * v;
  norm = std::sqrt(norm);
  double previous = 1e30;
  for (int r : {1, 2, 3, 4, 6}) {
    PowerSgd p({{0, {kRows, kCols}}}, kRows * kCols, r, 11);
    ASSERT_EQ(p.compressed_matrices(), 1) << "rank " << r;
    const double share = weight_of(w.rank(), w.size());  // Σ_r share·G = G
    std::vector<float> g(G.size());
    for (size_t i = 0; i < G.size(); ++i) g[i] = float(G[i]);
    p.reduce(comm, g.data(), share);
    double err = 0;
    for (size_t i = 0; i < G.size(); ++i) err += std::pow(double(g[i]) - G[i], 2);
    err = std::sqrt(err) / norm;
    EXPECT_LT(err, previous) << "rank " << r << " approximates worse than a lower rank";
    previous = err;
    if (r == kRank) {
      EXPECT_LT(err, 1e-5) << "rank " << r << " should reproduce a rank-" << kRank << " sum";
    }
  }
}

// Overlapped with backward: P's on one communicator as each bucket's gradients become final, Q's on
// another as its P's come back. Over steps (warm start and error feedback carried on), the result and the
// state are reduce()'s bits on two ranks and within float rounding on more (MPI may sum smaller messages
// in another order), and the same on every rank.
TEST(PowerSgd, BucketsOverlappedAsOneReduction) {
  World& w = World::init(nullptr, nullptr);
  MpiCommunicator comm(w.comm()), first(w.comm()), second(w.comm());
  const std::vector<PowerSgd::Param> params = {{0, {8, 4, 3, 3}}, {288, {8}}, {296, {8, 36}}, {584, {5}}};
  constexpr int64_t kFloats = 589;
  PowerSgd whole(params, kFloats, 2, 9), bucketed(params, kFloats, 2, 9);
  const std::vector<Bucket> buckets = plan_buckets({0, 288, 296, 584}, kFloats, 1);  // one per parameter
  ASSERT_EQ(buckets.size(), 4u);
  bucketed.use_buckets(buckets);
  EXPECT_EQ(bucketed.buckets(), 4);
  EXPECT_EQ(bucketed.floats_sent(), whole.floats_sent());
  for (int step = 0; step < 5; ++step) {
    std::vector<float> g(kFloats);
    for (int64_t i = 0; i < kFloats; ++i) g[size_t(i)] = std::sin(float(i * (w.rank() + 2) + step) * 0.41f);
    std::vector<float> h = g;
    const double weight = weight_of(w.rank(), w.size());
    whole.reduce(comm, g.data(), weight);
    bucketed.begin(first, second, h.data(), weight);
    for (const Bucket& b : buckets) {  // backward finishes them in plan order
      bucketed.grads_final(b.begin);
      bucketed.progress();
    }
    bucketed.start_rest();
    bucketed.finish();
    EXPECT_TRUE(same_on_every_rank(w.comm(), h)) << "step " << step;
    if (w.size() <= 2) {
      EXPECT_EQ(std::memcmp(h.data(), g.data(), g.size() * sizeof(float)), 0) << "step " << step;
      EXPECT_EQ(bucketed.q(), whole.q()) << "step " << step;
      EXPECT_EQ(bucketed.error(), whole.error()) << "step " << step;
    } else {
      double worst = 0;
      for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, double(std::fabs(h[i] - g[i])));
      EXPECT_LT(worst, 1e-4) << "step " << step;
    }
  }
}
