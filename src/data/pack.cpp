// pack(): split → shard plan → each rank writes its shards → global mean/std → commit → index.
#include "data/pack.hpp"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <set>

#include "data/rng.hpp"
#include "hetrain/error.hpp"
#include "hetrain/output_paths.hpp"
#include "hetrain/resources.hpp"

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

void SampleSource::get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const {
  get(i, image, label);
  boxes.clear();
}

void SampleSource::get_encoded(int64_t, std::vector<uint8_t>&, uint8_t*, int32_t*) const {
  HT_THROW("this source stores raw pixels only (JPEG storage: hetrain-pack folder --store jpeg)");
}

int32_t label_of_boxes(const std::vector<float>& boxes) {
  int32_t label = 0;
  float largest = -1;
  for (size_t r = 0; r + kBoxFields <= boxes.size(); r += kBoxFields)
    if (boxes[r + 3] * boxes[r + 4] > largest) {
      largest = boxes[r + 3] * boxes[r + 4];
      label = int32_t(boxes[r]);
    }
  return label;
}

namespace {

std::string folder_of(const std::string& p) {
  const size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
}

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
  const bool detection = src.meta.has_boxes;
  std::vector<std::vector<float>> boxes(detection ? block : 0);  // per sample of the block
  std::vector<SampleOrigin> origins(src.meta.has_origins ? block : 0);
  std::vector<std::vector<uint8_t>> encoded(src.meta.jpeg ? block : 0);  // per sample of the block
  EncodedImages batch_encoded;
  BoxList batch_boxes;
  for (int64_t b = begin; b < end; b += block) {
    int64_t n = std::min(block, end - b);
    std::exception_ptr err;
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t i = 0; i < n; ++i) {
      try {
        if (detection) src.get_boxed(order[b + i], images.data() + i * sb, &labels[i], boxes[i]);
        else if (src.meta.jpeg) src.get_encoded(order[b + i], encoded[i], images.data() + i * sb, &labels[i]);
        else src.get(order[b + i], images.data() + i * sb, &labels[i]);
        if (src.meta.has_origins) origins[i] = src.origin(order[b + i]);
      } catch (...) {
#pragma omp critical
        if (!err) err = std::current_exception();
      }
    }
    if (err) std::rethrow_exception(err);
    if (detection) {
      batch_boxes.rows.clear();
      batch_boxes.offsets.assign(1, 0);
      for (int64_t i = 0; i < n; ++i) {
        batch_boxes.rows.insert(batch_boxes.rows.end(), boxes[i].begin(), boxes[i].end());
        batch_boxes.offsets.push_back(int64_t(batch_boxes.rows.size()) / kBoxFields);
      }
    }
    if (src.meta.jpeg) {
      batch_encoded.bytes.clear();
      batch_encoded.offsets.assign(1, 0);
      for (int64_t i = 0; i < n; ++i) {
        batch_encoded.bytes.insert(batch_encoded.bytes.end(), encoded[i].begin(), encoded[i].end());
        batch_encoded.offsets.push_back(int64_t(batch_encoded.bytes.size()));
      }
      w.append_encoded(batch_encoded, images.data(), labels.data(), n);
    } else {
      w.append(images.data(), labels.data(), n, detection ? &batch_boxes : nullptr,
               src.meta.has_origins ? origins.data() : nullptr);
    }
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

// Number of files pack_one writes for n samples (1 = a plain file, else shards + index).
int shard_count(int64_t n, const PackOptions& opt) {
  return opt.shard_size > 0 ? int((n + opt.shard_size - 1) / opt.shard_size) : opt.shards;
}

// Agreement on an error found by some ranks: the lowest failing rank throws its message, the others throw
// the "stopping" line that hetrain-pack does not print. No error anywhere: returns.
void agree(const std::string& error, const std::string& output, MPI_Comm comm) {
  int rank = 0;
  if (mpi_up()) MPI_Comm_rank(comm, &rank);
  const int mine = error.empty() ? INT_MAX : rank;
  int lowest = mine;
  if (mpi_up()) HT_MPI_CHECK(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm));
  if (lowest == INT_MAX) return;
  if (lowest == rank) HT_THROW(error);
  HT_THROW("stopping: another rank failed while packing ", output);
}

// The files pack() writes, each with how to name it in a message ("-o out.h5", "shard 2 of -o out.h5").
std::vector<std::pair<std::string, std::string>> planned_outputs(const PackOptions& opt, int64_t n_train,
                                                                 int64_t n_val) {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& option, const std::string& path, int64_t n) {
    const std::string label = option + " " + path;
    out.push_back({label, path});
    const int S = shard_count(n, opt);
    if (S > 1 && S <= n)
      for (int s = 0; s < S; ++s) out.push_back({"shard " + std::to_string(s) + " of " + label, shard_path(path, s, S)});
  };
  add("-o", opt.output, n_train);
  if (n_val > 0) add("--val-output", opt.val_output, n_val);
  return out;
}

// Refuses an output that is an input or another output, or that is not a regular file (a device node, a
// FIFO, a folder), or whose folder cannot be written (hetrain/output_paths.hpp): writing it would destroy
// data and still exit 0.
std::string check_outputs(const std::vector<std::pair<std::string, std::string>>& outputs, const PackOptions& opt) {
  std::vector<NamedPath> outs, ins;
  for (const auto& o : outputs) outs.push_back({"", o.second, o.first});
  for (const auto& i : opt.inputs) ins.push_back({i.first, i.second});
  return output_paths_problem(outs, ins);
}

// Packs the samples `order` of src into `output`; returns the number of boxes written (detection sources).
// Collective over comm.
int64_t pack_one(const SampleSource& src, const std::vector<int64_t>& order, const std::string& output,
              const PackOptions& opt, PackResult& result) {
  int rank = 0, size = 1;
  if (mpi_up()) {
    MPI_Comm_rank(opt.comm, &rank);
    MPI_Comm_size(opt.comm, &size);
  }
  const int64_t n = int64_t(order.size());
  HT_CHECK(n > 0, output, ": empty dataset (0 samples to write)");
  int S = shard_count(n, opt);
  HT_CHECK(S >= 1, "shard count must be at least 1, got ", S);
  HT_CHECK(S <= n, output, ": ", S, " shards for only ", n, " samples");
  auto shard_begin = [&](int s) { return int64_t(s) * n / S; };
  const int C = src.meta.channels;

  // Phase 1: every rank writes its shards to temp files; errors are held until all ranks meet.
  std::vector<std::unique_ptr<FileWriter>> writers;
  // A failure anywhere: every rank deletes its temp files, then throws (agree).
  auto agree_or_discard = [&](const std::string& error) {
    try {
      agree(error, output, opt.comm);
    } catch (...) {
      writers.clear();
      throw;
    }
  };
  // Σx per channel, Σx² per channel, pixel count per channel, boxes (exact in a double below 2^53)
  std::vector<double> stats(2 * C + 2, 0.0);
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
      stats[2 * C + 1] += double(writers.back()->boxes_written());
    }
    progress.finish();
  } catch (const Error& e) {
    error = e.message();
  } catch (const std::exception& e) {
    error = e.what();
  }
  agree_or_discard(error);

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
  } catch (const Error& e) {
    error = e.message();
  }
  agree_or_discard(error);
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
    if (rank == 0) write_index(output, src.meta, files, counts, mean, stdev, int64_t(total[2 * C + 1]));
    barrier(opt.comm);
  }
  result.files.push_back(output);
  return int64_t(total[2 * C + 1]);
}

// Refuses, before anything is allocated or written, a dataset whose bookkeeping cannot fit in memory or whose
// files cannot fit on disk: a huge --count would otherwise end in std::bad_alloc, or fill the disk for hours.
// Returns the reason ("" when it fits).
std::string check_room(const SampleSource& src, const PackOptions& opt, int64_t n, int64_t n_val) {
  const double sb = double(src.meta.channels) * src.meta.height * src.meta.width;
  // pack() keeps a flag and an index per sample (and the seeded permutation when it splits off a validation
  // set); fill() a block of decoded samples of at most about 32 MiB, or one sample when that is larger.
  const double index = double(n) * (1 + sizeof(int64_t)) + (n_val > 0 ? double(n) * sizeof(int64_t) : 0.0);
  const double block = std::max(sb, std::min(1024 * sb, double(32 << 20)));
  try {
    check_memory_for(index + block, "packing " + std::to_string(n) + " samples");
    // Uncompressed files hold at least their pixels; what gzip or JPEG saves cannot be known before writing.
    if (opt.write.gzip_level == 0 && !src.meta.jpeg) {
      const double train = double(n - n_val) * sb, val = double(n_val) * sb;
      if (n_val > 0 && folder_of(opt.val_output) != folder_of(opt.output)) {
        check_disk_for(train, opt.output, "-o " + opt.output + " (" + std::to_string(n - n_val) + " samples)");
        check_disk_for(val, opt.val_output,
                       "--val-output " + opt.val_output + " (" + std::to_string(n_val) + " samples)");
      } else {
        check_disk_for(train + val, opt.output, "-o " + opt.output + " (" + std::to_string(n) + " samples)");
      }
    }
  } catch (const Error& e) {
    return e.message();
  }
  return "";
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
  // The outputs first (before the disk-space check, which would read a device's file system).
  const auto outputs = planned_outputs(opt, n - n_val, n_val);
  agree(check_outputs(outputs, opt), opt.output, opt.comm);
  agree(check_room(src, opt, n, n_val), opt.output, opt.comm);
  // Validation samples: the first n_val of a seeded permutation; both sets keep the source order.
  std::vector<char> is_val(n, 0);
  if (n_val > 0) {
    std::vector<int64_t> perm = seeded_permutation(opt.split_seed, n);
    for (int64_t i = 0; i < n_val; ++i) is_val[perm[i]] = 1;
  }
  std::vector<int64_t> train, val;
  for (int64_t i = 0; i < n; ++i) (is_val[i] ? val : train).push_back(i);

  // Stale temporaries of earlier runs that died (SIGKILL, a crash): rank 0 removes them before any rank
  // creates its own.
  int rank = 0;
  if (mpi_up()) MPI_Comm_rank(opt.comm, &rank);
  if (rank == 0) {
    std::vector<std::string> paths;
    for (const auto& o : outputs) paths.push_back(o.second);
    for (const std::string& f : remove_stale_temporaries(paths))
      std::fprintf(stderr, "hetrain-pack: removed stale temporary file %s\n", f.c_str());
  }
  barrier(opt.comm);

  PackResult result;
  result.train_boxes = pack_one(src, train, opt.output, opt, result);
  result.train_count = int64_t(train.size());
  if (!val.empty()) {
    PackOptions vopt = opt;
    result.val_boxes = pack_one(src, val, opt.val_output, vopt, result);
    result.val_count = int64_t(val.size());
  }
  return result;
}

std::vector<std::string> remove_stale_temporaries(const std::vector<std::string>& outputs) {
  // Group the outputs by folder: each folder is listed once.
  std::map<std::string, std::set<std::string>> by_dir;
  for (const std::string& p : outputs) {
    const size_t slash = p.find_last_of('/');
    by_dir[slash == std::string::npos ? "." : p.substr(0, slash + 1)].insert(
        slash == std::string::npos ? p : p.substr(slash + 1));
  }
  std::vector<std::string> removed;
  for (const auto& [dir, names] : by_dir) {
    DIR* d = ::opendir(dir.c_str());
    if (!d) continue;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      const size_t tag = name.rfind(".tmp-");
      if (tag == std::string::npos || !names.count(name.substr(0, tag))) continue;
      const std::string digits = name.substr(tag + 5);
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const long pid = std::strtol(digits.c_str(), nullptr, 10);
      if (pid <= 0 || pid == long(::getpid())) continue;
      if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
      const std::string path = (dir == "." ? "" : dir) + name;
      if (::unlink(path.c_str()) == 0)
        removed.push_back(path + " (left by process " + digits + ", which is no longer running)");
    }
    ::closedir(d);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

}  // namespace hetrain::data
