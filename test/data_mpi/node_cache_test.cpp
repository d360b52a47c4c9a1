// The per-node cache: 4 ranks read identical data with the cache on and off.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <numeric>

#include "data/pack.hpp"
#include "data/rng.hpp"
#include "hetrain/data.hpp"

using namespace hetrain::data;

TEST(NodeCache, SameBytesWithAndWithoutCache) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  // Rank 0 picks a folder; everyone packs collectively (each rank writes its shards).
  char dir[256] = {0};
  if (rank == 0) std::snprintf(dir, sizeof dir, "/tmp/hetrain-node-cache-%d", int(getpid()));
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::create_directories(dir);
  MPI_Barrier(MPI_COMM_WORLD);
  auto src = open_synthetic(4, 203, 3, 6, 5, 7);
  PackOptions o;
  o.output = std::string(dir) + "/d.h5";
  o.shards = 5;
  o.progress = false;
  o.comm = MPI_COMM_WORLD;
  pack(*src, o);
  {
    auto plain = Dataset::open(o.output), cached = Dataset::open(o.output);
    cached->enable_node_cache(node);
    ASSERT_TRUE(cached->node_cache_enabled());
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
    MPI_Barrier(MPI_COMM_WORLD);
  }  // the cached Dataset frees its window here, on every rank together
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::filesystem::remove_all(dir);
  MPI_Comm_free(&node);
}
