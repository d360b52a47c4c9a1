// pack(): split → shard plan → each rank writes its shards → global mean/std → commit → index.
#include "data/pack.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>

#include "data/rng.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

std::string shard_path(const std::string& output, int s, int S) {
  std::string stem = output, ext;
  size_t slash = output.find_last_of('/');
  size_t dot = output.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) {
    stem = output.substr(0, dot);
    ext = output.substr(dot);
  } else {
    ext = ".h5";
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "-%05d-of-%05d", s, S);
  return stem + buf + ext;
}

namespace {

std::string base_name(const std::string& p) {
  size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Writes positions [begin, end) of `order` (source sample ids) into w, decoding a block at a time with
// OpenMP threads (sources are thread-safe).
void fill(const SampleSource& src, const std::vector<int64_t>& order, int64_t begin, int64_t end, FileWriter& w,
          Progress& progress) {
  const int64_t sb = int64_t(src.meta.channels) * src.meta.height * src.meta.width;
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(1024, (32 << 20) / sb));
  std::vector<uint8_t> images(block * sb);
  std::vector<int32_t> labels(block);
  for (int64_t b = begin; b < end; b += block) {
    int64_t n = std::min(block, end - b);
    std::exception_ptr err;
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < n; ++i) {
      try {
        src.get(order[b + i], images.data() + i * sb, &labels[i]);
      } catch (...) {
#pragma omp critical
        if (!err) err = std::current_exception();
      }
    }
    if (err) std::rethrow_exception(err);
    w.append(images.data(), labels.data(), n);
    progress.add(n);
  }
}

// Collectives that degrade to local no-ops when MPI was never started (a plain `hetrain-pack` run skips
// MPI_Init: singleton start-up costs about a second).
bool mpi_up() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}
void allreduce(const void* in, void* out, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  if (mpi_up()) {
    HT_MPI_CHECK(MPI_Allreduce(in, out, n, t, op, comm));
  } else {
    std::memcpy(out, in, size_t(n) * (t == MPI_DOUBLE ? sizeof(double) : sizeof(int)));
  }
}
void barrier(MPI_Comm comm) {
  if (mpi_up()) HT_MPI_CHECK(MPI_Barrier(comm));
}

// Packs the samples `order` of src into `output`. Collective over comm.
void pack_one(const SampleSource& src, const std::vector<int64_t>& order, const std::string& output,
              const PackOptions& opt, PackResult& result) {
  int rank = 0, size = 1;
  if (mpi_up()) {
    MPI_Comm_rank(opt.comm, &rank);
    MPI_Comm_size(opt.comm, &size);
  }
  const int64_t n = int64_t(order.size());
  HT_CHECK(n > 0, output, ": empty dataset (0 samples to write)");
  int S = opt.shard_size > 0 ? int((n + opt.shard_size - 1) / opt.shard_size) : opt.shards;
  HT_CHECK(S >= 1, "shard count must be at least 1, got ", S);
  HT_CHECK(S <= n, output, ": ", S, " shards for only ", n, " samples");
  auto shard_begin = [&](int s) { return int64_t(s) * n / S; };
  const int C = src.meta.channels;

  // Phase 1: every rank writes its shards to temp files; errors are held until all ranks meet.
  std::vector<std::unique_ptr<FileWriter>> writers;
  std::vector<double> stats(2 * C + 1, 0.0);  // Σx per channel, Σx² per channel, pixel count per channel
  std::string error;
  try {
    int64_t mine = 0;
    for (int s = rank; s < S; s += size) mine += shard_begin(s + 1) - shard_begin(s);
    Progress progress(base_name(output) + (size > 1 ? " (rank 0)" : ""), mine, opt.progress && rank == 0);
    for (int s = rank; s < S; s += size) {
      std::string path = S == 1 ? output : shard_path(output, s, S);
      writers.push_back(std::make_unique<FileWriter>(path, shard_begin(s + 1) - shard_begin(s), src.meta, opt.write));
      fill(src, order, shard_begin(s), shard_begin(s + 1), *writers.back(), progress);
      for (int c = 0; c < C; ++c) {
        stats[c] += writers.back()->sum()[c];
        stats[C + c] += writers.back()->sumsq()[c];
      }
      stats[2 * C] += double(writers.back()->written()) * src.meta.height * src.meta.width;
    }
    progress.finish();
  } catch (const Error& e) {
    error = e.message();
  } catch (const std::exception& e) {
    error = e.what();
  }
  int failed = error.empty() ? 0 : 1, any_failed = 0;
  allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, opt.comm);
  if (any_failed) {
    writers.clear();  // deletes the temp files
    if (failed) HT_THROW(error);
    HT_THROW("stopping: another rank failed while packing ", output);
  }

  // Phase 2: the global mean/std go into every file, so each shard also reads alone.
  std::vector<double> total(stats.size());
  allreduce(stats.data(), total.data(), int(stats.size()), MPI_DOUBLE, MPI_SUM, opt.comm);
  std::vector<float> mean(C), stdev(C);
  for (int c = 0; c < C; ++c) {
    double m = total[c] / total[2 * C];
    mean[c] = float(m);
    stdev[c] = float(std::sqrt(std::max(0.0, total[C + c] / total[2 * C] - m * m)));
  }
  try {
    for (size_t k = 0; k < writers.size(); ++k)
      writers[k]->finish(mean, stdev, S == 1 ? -1 : rank + int(k) * size, S);
    failed = 0;
  } catch (const Error& e) {
    error = e.message();
    failed = 1;
  }
  allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, opt.comm);
  if (any_failed) {
    writers.clear();
    if (failed) HT_THROW(error);
    HT_THROW("stopping: another rank failed while packing ", output);
  }
  for (auto& w : writers) w->commit();
  barrier(opt.comm);

  // Phase 3: the index (rank 0), last, so it only exists once every shard does.
  if (S > 1) {
    std::vector<std::string> files;
    std::vector<int64_t> counts;
    for (int s = 0; s < S; ++s) {
      files.push_back(base_name(shard_path(output, s, S)));
      counts.push_back(shard_begin(s + 1) - shard_begin(s));
      result.files.push_back(shard_path(output, s, S));
    }
    if (rank == 0) write_index(output, src.meta, files, counts, mean, stdev);
    barrier(opt.comm);
  }
  result.files.push_back(output);
}

}  // namespace

PackResult pack(const SampleSource& src, const PackOptions& opt) {
  HT_CHECK(!opt.output.empty(), "no output file given (-o)");
  HT_CHECK(opt.val_fraction >= 0 && opt.val_fraction < 1, "--val-fraction must be in [0, 1), got ",
           opt.val_fraction);
  const int64_t n = src.size();
  HT_CHECK(n > 0, "the input holds no samples: refusing to write an empty dataset");
  int64_t n_val = int64_t(std::llround(opt.val_fraction * double(n)));
  if (opt.val_fraction > 0) {
    HT_CHECK(!opt.val_output.empty(), "--val-fraction needs --val-output");
    HT_CHECK(n_val >= 1 && n_val < n, "--val-fraction ", opt.val_fraction, " of ", n,
             " samples leaves an empty train or validation set");
  }
  // Validation samples: the first n_val of a seeded permutation; both sets keep the source order.
  std::vector<char> is_val(n, 0);
  if (n_val > 0) {
    std::vector<int64_t> perm = seeded_permutation(opt.split_seed, n);
    for (int64_t i = 0; i < n_val; ++i) is_val[perm[i]] = 1;
  }
  std::vector<int64_t> train, val;
  for (int64_t i = 0; i < n; ++i) (is_val[i] ? val : train).push_back(i);

  PackResult result;
  pack_one(src, train, opt.output, opt, result);
  result.train_count = int64_t(train.size());
  if (!val.empty()) {
    PackOptions vopt = opt;
    pack_one(src, val, opt.val_output, vopt, result);
    result.val_count = int64_t(val.size());
  }
  return result;
}

}  // namespace hetrain::data
