// bench/reader_bench.cpp — dataset reader throughput from 1..n ranks (issue 3).
//
// Every rank reads its share of one epoch, in batches, the way training reads (global batch B = n·b,
// step s owns perm[s·B, (s+1)·B), rank r takes b samples at offset r·b). Modes, each timed separately:
//   sequential  rank r reads the contiguous range [r·N/n, (r+1)·N/n) in order: Dataset::read, uint8 only
//               (the best case: every batch is one hyperslab)
//   random      the training pattern above (seeded permutation): Dataset::read, uint8 only
//   prefetch    the training pattern through the Prefetcher (background reader thread, `depth` batches
//               ahead, uint8 → normalised float, no augmentation); the consumer only takes the batches
//   nodecache   the training pattern after Dataset::enable_node_cache (one copy per node in shared memory)
// Throughput is aggregate over ranks: samples of all ranks / slowest rank's time. MB/s counts the uint8
// image bytes (C·H·W per sample), not labels or the float output.
//
//   mpirun -n 4 bench_reader --data f.h5 --batch 64 --modes sequential,random,prefetch
// Rank 0 prints one key=value line per mode.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace {

using hetrain::data::Dataset;

struct Options {
  std::string data;
  std::string modes = "sequential,random,prefetch";
  int batch = 64;  // per rank
  int depth = 4;
  int threads = 1;  // normalisation threads of the prefetcher
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    HT_CHECK(i + 1 < argc, "bench_reader: option ", key, " needs a value");
    const char* v = argv[++i];
    if (key == "--data") o.data = v;
    else if (key == "--modes") o.modes = v;
    else if (key == "--batch") o.batch = std::atoi(v);
    else if (key == "--depth") o.depth = std::atoi(v);
    else if (key == "--threads") o.threads = std::atoi(v);
    else HT_THROW("bench_reader: unknown option ", key);
  }
  HT_CHECK(!o.data.empty(), "bench_reader: --data FILE is required");
  HT_CHECK(o.batch >= 1 && o.depth >= 1 && o.threads >= 1, "bench_reader: bad --batch/--depth/--threads");
  return o;
}

// The batches (index lists) this rank reads in one epoch under `mode`.
std::vector<std::vector<int64_t>> plan_batches(const std::string& mode, int64_t N, int b, int rank, int ranks) {
  std::vector<std::vector<int64_t>> out;
  if (mode == "sequential") {
    const int64_t begin = N * rank / ranks, end = N * (rank + 1) / ranks;
    for (int64_t i = begin; i < end; i += b) {
      std::vector<int64_t> idx;
      for (int64_t j = i; j < std::min(end, i + b); ++j) idx.push_back(j);
      out.push_back(std::move(idx));
    }
    return out;
  }
  const int64_t B = int64_t(b) * ranks;
  hetrain::data::EpochPlan plan(/*seed=*/7, N, B, hetrain::data::LastBatch::Drop);
  for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) out.push_back(plan.slice(0, s, int64_t(rank) * b, b));
  return out;
}

void run_mode(const std::string& mode, Dataset& ds, const Options& o, int rank, int ranks) {
  const auto& info = ds.info();
  auto batches = plan_batches(mode, info.num_samples, o.batch, rank, ranks);
  if (mode == "nodecache") {
    MPI_Comm node;
    HT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    ds.enable_node_cache(node);  // load time is not part of the timed reads
    MPI_Comm_free(&node);
  }
  int64_t samples = 0;
  std::vector<uint8_t> images(size_t(o.batch) * info.sample_bytes());
  std::vector<int32_t> labels(o.batch);
  HT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  const auto t0 = std::chrono::steady_clock::now();
  double wait = 0;
  if (mode == "prefetch") {
    hetrain::data::Prefetcher pf(ds, o.depth, o.threads);
    size_t submitted = 0;
    for (; submitted < batches.size() && submitted < size_t(o.depth); ++submitted)
      pf.submit(batches[submitted], false, {}, submitted);
    for (size_t got = 0; got < batches.size(); ++got) {
      hetrain::data::Batch batch = pf.next();
      wait += batch.wait_seconds;
      samples += int64_t(batch.labels.size());
      if (submitted < batches.size()) {
        pf.submit(batches[submitted], false, {}, submitted);
        ++submitted;
      }
    }
  } else {
    for (const auto& idx : batches) {
      ds.read(idx, images.data(), labels.data());
      samples += int64_t(idx.size());
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double max_seconds = 0;
  int64_t total = 0;
  HT_MPI_CHECK(MPI_Reduce(&seconds, &max_seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
  HT_MPI_CHECK(MPI_Reduce(&samples, &total, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD));
  if (rank == 0) {
    const double mb = double(total) * double(info.sample_bytes()) / 1e6;
    std::printf("mode=%s ranks=%d batch=%d shape=%dx%dx%d samples=%lld seconds=%.4f samples_per_s=%.1f "
                "mb_per_s=%.1f read_calls_rank0=%lld\n",
                mode.c_str(), ranks, o.batch, info.channels, info.height, info.width, (long long)total,
                max_seconds, double(total) / max_seconds, mb / max_seconds, (long long)ds.read_calls());
    std::fflush(stdout);
  }
}

int run(const Options& o) {
  int rank = 0, ranks = 1;
  HT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  HT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  std::stringstream modes(o.modes);
  std::string mode;
  while (std::getline(modes, mode, ',')) {
    HT_CHECK(mode == "sequential" || mode == "random" || mode == "prefetch" || mode == "nodecache",
             "bench_reader: unknown mode '", mode, "' (sequential, random, prefetch, nodecache)");
    auto ds = Dataset::open(o.data);  // a fresh reader per mode: no HDF5 chunk cache carried over
    run_mode(mode, *ds, o, rank, ranks);
    HT_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));  // node-cache windows are freed collectively with ds
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    rc = run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_reader: error: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
