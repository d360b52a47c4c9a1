// World facts, configuration and replica checks across ranks (any world size 1..4).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "hetrain/dist/world.hpp"
#include "hetrain/error.hpp"

using namespace hetrain;
using namespace hetrain::dist;

namespace {
World& world() { return World::init(nullptr, nullptr); }  // adopts the MPI that the test main started
}  // namespace

TEST(World, Facts) {
  World& w = world();
  int size = 0, rank = -1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_EQ(w.size(), size);
  EXPECT_EQ(w.rank(), rank);
  EXPECT_FALSE(w.host().empty());
  ASSERT_GE(w.local_rank(), 0);
  ASSERT_LT(w.local_rank(), w.local_size());
  EXPECT_LE(w.local_size(), w.size());
  // On each host the local ranks are exactly 0 .. local_size-1.
  std::vector<std::string> hosts = allgather_strings(w.comm(), w.host());
  std::vector<int> mine = {w.local_rank(), w.local_size()}, all(2 * size_t(size));
  MPI_Allgather(mine.data(), 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD);
  std::map<std::string, std::set<int>> locals;
  std::map<std::string, int> sizes;
  for (int r = 0; r < size; ++r) {
    locals[hosts[r]].insert(all[2 * r]);
    sizes[hosts[r]] = all[2 * r + 1];
  }
  for (const auto& [host, set] : locals) {
    EXPECT_EQ(int(set.size()), sizes[host]) << host;
    EXPECT_EQ(*set.rbegin(), sizes[host] - 1) << host;
  }
  // Errors now carry the rank and host.
  try {
    HT_THROW("probe");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("rank " + std::to_string(rank) + " on " + w.host() + ": probe", 0), 0u)
        << e.what();
  }
}

TEST(World, RankTableHasOneLinePerRank) {
  World& w = world();
  std::string table = w.rank_table("cpu");
  int lines = 0;
  for (char c : table) lines += c == '\n';
  EXPECT_EQ(lines, w.size() + 1);
  EXPECT_NE(table.find(w.host()), std::string::npos);
  EXPECT_NE(table.find("cpu"), std::string::npos);
}

TEST(World, SameConfigPasses) {
  EXPECT_NO_THROW(world().check_same_config("batch=32\nlr=0.1\nbalance=dynamic\n"));
}

TEST(World, DifferentConfigThrowsOnEveryRank) {
  World& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs at least 2 ranks to differ";
  const int odd = w.size() - 1;
  std::string text = std::string("batch=32\nlr=") + (w.rank() == odd ? "0.2" : "0.1") + "\nbalance=dynamic\n";
  try {
    w.check_same_config(text);
    FAIL() << "expected a configuration mismatch error";
  } catch (const AgreedError& e) {  // every rank knows: main() prints once and exits cleanly
    std::string msg = e.what();
    EXPECT_NE(msg.find("rank " + std::to_string(odd) + " differs from rank 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'lr=0.1'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'lr=0.2'"), std::string::npos) << msg;
  }
}

TEST(World, CheckIdentical) {
  World& w = world();
  std::vector<float> p(1000);
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::sin(float(i));
  EXPECT_NO_THROW(w.check_identical(p.data(), int64_t(p.size()), "parameters"));
  if (w.size() < 2) GTEST_SKIP() << "needs at least 2 ranks to differ";
  if (w.rank() == 1) {  // flip the lowest mantissa bit of one value
    uint32_t bits;
    std::memcpy(&bits, &p[500], 4);
    bits ^= 1u;
    std::memcpy(&p[500], &bits, 4);
  }
  try {
    w.check_identical(p.data(), int64_t(p.size()), "parameters");
    FAIL() << "expected a replica mismatch error";
  } catch (const AgreedError& e) {
    EXPECT_NE(std::string(e.what()).find("parameters differ between ranks: rank(s) 1 differ"), std::string::npos)
        << e.what();
  }
}
