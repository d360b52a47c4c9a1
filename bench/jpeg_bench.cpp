// bench/jpeg_bench.cpp — how fast one process turns a JPEG dataset's stored bytes into batches
// (docs/dataset-format.md, "JPEG storage"): the reader's share (read_encoded) and the decoder's
// (decode_batch, RandomResizedCrop or the evaluation transform) on 1..T threads, and reading a raw dataset of
// the same images for comparison. Batches of --batch samples in a seeded random order, as training reads.
//
//   bench_jpeg --data photos-jpeg.h5 [--raw photos-raw.h5] [--batch 64] [--threads 2] [--seconds 3]
// One key=value line per measurement.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace {
using namespace hetrain::data;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string data, raw;
  int batch = 64, threads = 2;
  double seconds = 3;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    HT_CHECK(i + 1 < argc, key, " needs a value");
    const char* v = argv[++i];
    if (key == "--data") o.data = v;
    else if (key == "--raw") o.raw = v;
    else if (key == "--batch") o.batch = std::atoi(v);
    else if (key == "--threads") o.threads = std::atoi(v);
    else if (key == "--seconds") o.seconds = std::atof(v);
    else HT_THROW("unknown option ", key, " (--data --raw --batch --threads --seconds)");
  }
  HT_CHECK(!o.data.empty(), "--data FILE (a JPEG dataset) is required");
  HT_CHECK(o.batch >= 1 && o.threads >= 1 && o.seconds > 0, "--batch, --threads and --seconds must be positive");
  return o;
}

// Batch k of a seeded random order over n samples (wrapping around).
std::vector<int64_t> batch_of(const std::vector<int64_t>& order, int64_t k, int batch) {
  std::vector<int64_t> idx(static_cast<size_t>(batch));
  for (int i = 0; i < batch; ++i) idx[size_t(i)] = order[size_t((k * batch + i) % int64_t(order.size()))];
  return idx;
}

// Runs f(batch number) until `seconds` have passed (at least 2 batches); returns samples per second.
template <typename F>
double rate(double seconds, int batch, F f) {
  f(0);  // warm-up: first-touch of the buffers, the file's pages
  const auto t0 = Clock::now();
  int64_t k = 1;
  double elapsed = 0;
  do {
    f(k++);
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < seconds || k < 3);
  return double(k - 1) * batch / elapsed;
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  try {
    const Options o = parse(argc, argv);
    auto ds = Dataset::open(o.data);
    const DatasetInfo& info = ds->info();
    HT_CHECK(info.jpeg, o.data, ": not a JPEG dataset (pack it with hetrain-pack folder --store jpeg)");
    std::vector<int64_t> order(size_t(info.num_samples));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
    std::vector<uint8_t> out(size_t(o.batch) * size_t(info.sample_bytes()));
    EncodedImages enc;
    double bytes = 0, samples = 0;
    const double read_rate = rate(o.seconds, o.batch, [&](int64_t k) {
      ds->read_encoded(batch_of(order, k, o.batch), enc, nullptr);
      bytes += double(enc.bytes.size());
      samples += o.batch;
    });
    std::printf("stage=read_encoded threads=1 samples_per_s=%.1f bytes_per_sample=%.0f\n", read_rate, bytes / samples);
    // Decoding alone, from bytes already in memory: RandomResizedCrop (training) and centre crop (evaluation).
    std::vector<std::vector<int64_t>> batches;
    std::vector<EncodedImages> encoded;
    const int64_t held = std::max<int64_t>(1, std::min<int64_t>(info.num_samples / o.batch, 16));
    for (int64_t k = 0; k < held; ++k) {
      batches.push_back(batch_of(order, k, o.batch));
      encoded.emplace_back();
      ds->read_encoded(batches.back(), encoded.back(), nullptr);
    }
    for (const bool rrc : {true, false})
      for (int t = 1; t <= o.threads; ++t) {
        const double r = rate(o.seconds, o.batch, [&](int64_t k) {
          decode_batch(encoded[size_t(k % held)], batches[size_t(k % held)], info, rrc, uint64_t(k / held), out.data(), t);
        });
        std::printf("stage=decode transform=%s threads=%d samples_per_s=%.1f size=%dx%d\n", rrc ? "rrc" : "centre", t,
                    r, info.height, info.width);
      }
    if (!o.raw.empty()) {
      auto raw = Dataset::open(o.raw);
      const double r = rate(o.seconds, o.batch,
                            [&](int64_t k) { raw->read(batch_of(order, k, o.batch), out.data(), nullptr); });
      std::printf("stage=read_raw threads=1 samples_per_s=%.1f bytes_per_sample=%lld\n", r,
                  (long long)raw->info().sample_bytes());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_jpeg: %s\n", e.what());
    MPI_Finalize();
    return 1;
  }
  MPI_Finalize();
  return 0;
}
