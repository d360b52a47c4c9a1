// The per-node cache: 4 ranks read identical data with the cache on and off.
//
// Failing together: a failed assertion (or an exception) on one rank must not leave the other ranks
// waiting in a barrier or a collective for it. Every local phase runs inside step(), which catches
// exceptions, turns them into test failures and then agrees with all ranks whether anyone failed; the test
// returns on every rank together when one did. Assertions inside a phase (ASSERT_*) only leave that phase.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <numeric>

#include "data/pack.hpp"
#include "data/rng.hpp"
#include "collective_step.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::data;

using data_mpi_test::step;

TEST(NodeCache, SameBytesWithAndWithoutCache) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  // Rank 0 picks a folder; everyone packs collectively (each rank writes its shards).
  char dir[256] = {0};
  if (rank == 0) std::snprintf(dir, sizeof dir, "/tmp/hetrain-node-cache-%d", int(getpid()));
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  struct Cleanup {  // on every rank, whichever way the test ends; rank 0 removes the folder
    MPI_Comm* node;
    int rank;
    const char* dir;
    ~Cleanup() {
      if (rank == 0) std::filesystem::remove_all(dir);
      MPI_Comm_free(node);
    }
  } cleanup{&node, rank, dir};
  if (!step(MPI_COMM_WORLD, [&] { if (rank == 0) std::filesystem::create_directories(dir); })) return;
  std::unique_ptr<SampleSource> src;
  PackOptions o;
  // pack() is collective and fails on every rank together by itself.
  if (!step(MPI_COMM_WORLD, [&] {
        src = open_synthetic(4, 203, 3, 6, 5, 7);
        o.output = std::string(dir) + "/d.h5";
        o.shards = 5;
        o.progress = false;
        o.comm = MPI_COMM_WORLD;
        pack(*src, o);
      }))
    return;
  {
    std::unique_ptr<Dataset> plain, cached;
    if (!step(MPI_COMM_WORLD, [&] { plain = Dataset::open(o.output), cached = Dataset::open(o.output); })) return;
    // Collective over node: every rank reaches it (the step above agreed), and it fails on all ranks together.
    if (!step(MPI_COMM_WORLD, [&] {
          cached->enable_node_cache(node);
          ASSERT_TRUE(cached->node_cache_enabled());
        }))
      return;  // the cached Dataset frees its window in its destructor, on every rank together
    step(MPI_COMM_WORLD, [&] {
      const int64_t sb = plain->info().sample_bytes();
      Rng rng(uint64_t(rank) + 1);
      for (int t = 0; t < 10; ++t) {
        std::vector<int64_t> idx(1 + rng.below(50));
        for (auto& i : idx) i = int64_t(rng.below(203));
        std::vector<uint8_t> a(idx.size() * sb), b(idx.size() * sb), want(sb);
        std::vector<int32_t> la(idx.size()), lb(idx.size());
        plain->read(idx, a.data(), la.data());
        cached->read(idx, b.data(), lb.data());
        ASSERT_EQ(a, b);
        ASSERT_EQ(la, lb);
        for (size_t k = 0; k < idx.size(); ++k) {  // and both equal the source
          int32_t l;
          src->get(idx[k], want.data(), &l);
          ASSERT_TRUE(std::equal(want.begin(), want.end(), a.begin() + k * sb));
          ASSERT_EQ(l, la[k]);
        }
      }
    });
  }  // the cached Dataset frees its window here, on every rank together
  MPI_Barrier(MPI_COMM_WORLD);  // no rank removes the folder while another still reads it
}

// Loading the cache fails on one rank only (its own copy of the set lost a shard after opening): every node
// rank throws, the failing one with its reason, and none is left waiting in the cache's collectives.
TEST(NodeCache, LoadFailureOnOneRankFailsEveryRank) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int node_rank = 0, node_size = 1;
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_size(node, &node_size);
  char dir[256] = {0};
  if (rank == 0) std::snprintf(dir, sizeof dir, "/tmp/hetrain-node-cache-fail-%d", int(getpid()));
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  struct Cleanup {
    MPI_Comm* node;
    int rank;
    const char* dir;
    ~Cleanup() {
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 0) std::filesystem::remove_all(dir);
      MPI_Comm_free(node);
    }
  } cleanup{&node, rank, dir};
  if (node_size < 2) GTEST_SKIP() << "needs at least 2 ranks on a node";
  const int victim = node_size - 1;  // node rank whose copy breaks
  const std::string mine = std::string(dir) + "/rank" + std::to_string(rank);
  std::unique_ptr<Dataset> ds;
  if (!step(MPI_COMM_WORLD, [&] {
        if (rank == 0) {
          std::filesystem::create_directories(dir);
          PackOptions o;
          o.output = std::string(dir) + "/d.h5";
          o.shards = 4;
          o.progress = false;
          pack(*open_synthetic(4, 400, 1, 8, 8, 5), o);
        }
      }))
    return;
  if (!step(MPI_COMM_WORLD, [&] {
        std::filesystem::create_directories(mine);
        for (const auto& e : std::filesystem::directory_iterator(dir))
          if (e.is_regular_file()) std::filesystem::copy_file(e.path(), mine + "/" + e.path().filename().string());
        ds = Dataset::open(mine + "/d.h5");
        // After a successful open, the victim's copy loses the last shard (its share of the cache is there).
        if (node_rank == victim) std::filesystem::resize_file(shard_path(mine + "/d.h5", 3, 4), 1000);
      }))
    return;
  std::string message;
  try {
    ds->enable_node_cache(node);
  } catch (const hetrain::Error& e) {
    message = e.message();
  }
  if (node_rank == victim) {
    EXPECT_NE(message.find("d-00003-of-00004.h5"), std::string::npos) << message;
    EXPECT_EQ(message.find("another rank"), std::string::npos) << message;
  } else {
    EXPECT_NE(message.find("another rank of this node failed"), std::string::npos) << message;
  }
  EXPECT_FALSE(ds->node_cache_enabled());
  ds.reset();  // no window left to free collectively
}
