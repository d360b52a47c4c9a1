// Detection data read by several ranks (docs/detection.md): the epoch plan's slices under uneven, changing
// splits reach every image exactly once per epoch, each with its own boxes — as stored (epoch 0) and moved
// with its crop and flip (epoch 1).
//
// By default the ranks pack a small sharded detection set themselves. test/e2e/detect_data.sh points
// HETRAIN_DETECT_DATA at a set made by `hetrain-pack detect-synthetic` instead, and HETRAIN_DETECT_DUMP at
// a file prefix: each rank then writes what it read in epoch 0 to <prefix>.rank<r>, one line per image
// ("index count class cx cy w h ..."), for the script to compare with h5py.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
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

namespace {

// Sample i: seeded pixels and i % 4 seeded boxes.
class SeededBoxes : public SampleSource {
 public:
  explicit SeededBoxes(int64_t n) : n_(n) {
    meta.channels = 1;
    meta.height = meta.width = 8;
    meta.num_classes = 5;
    meta.has_boxes = true;
  }
  int64_t size() const override { return n_; }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    std::vector<float> b;
    get_boxed(i, image, label, b);
  }
  void get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const override {
    Rng rng(5, uint64_t(i));
    for (int k = 0; k < 64; ++k) image[k] = uint8_t(rng.next());
    boxes.clear();
    for (int k = 0; k < i % 4; ++k) {
      const float w = float(0.1 + 0.3 * rng.uniform()), h = float(0.1 + 0.3 * rng.uniform());
      boxes.insert(boxes.end(), {float(rng.below(5)), float(w / 2 + (1 - w) * rng.uniform()),
                                 float(h / 2 + (1 - h) * rng.uniform()), w, h});
    }
    *label = label_of_boxes(boxes);
  }

 private:
  int64_t n_;
};

// The split of step s's batch of size b over `ranks`: uneven, different every step, zeros allowed.
std::vector<int64_t> split_of(int64_t s, int64_t b, int ranks) {
  std::vector<int64_t> w(static_cast<size_t>(ranks)), out(static_cast<size_t>(ranks));
  int64_t sum = 0;
  for (int r = 0; r < ranks; ++r) sum += w[size_t(r)] = (r + s) % 3;
  if (sum == 0) w[0] = sum = 1;
  int64_t given = 0;
  for (int r = 0; r < ranks; ++r) given += out[size_t(r)] = b * w[size_t(r)] / sum;
  out[size_t(s % ranks)] += b - given;
  return out;
}
}  // namespace

TEST(DetectEpoch, EachImageOncePerEpochWithItsBoxes) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* given = std::getenv("HETRAIN_DETECT_DATA");
  const char* dump = std::getenv("HETRAIN_DETECT_DUMP");
  char dir[256] = {0};
  if (rank == 0) std::snprintf(dir, sizeof dir, "/tmp/hetrain-detect-epoch-%d", int(getpid()));
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  struct Cleanup {
    int rank;
    const char* dir;
    ~Cleanup() {
      if (rank == 0) std::filesystem::remove_all(dir);
    }
  } cleanup{rank, dir};
  std::string path = given ? given : std::string(dir) + "/det.h5";
  if (!given) {
    if (!step(MPI_COMM_WORLD, [&] { if (rank == 0) std::filesystem::create_directories(dir); })) return;
    if (!step(MPI_COMM_WORLD, [&] {
          PackOptions o;
          o.output = path;
          o.shards = 3;
          o.progress = false;
          o.comm = MPI_COMM_WORLD;  // each rank writes its shards
          pack(SeededBoxes(53), o);
        }))
      return;
  }
  std::unique_ptr<Dataset> ds;
  if (!step(MPI_COMM_WORLD, [&] {
        ds = Dataset::open(path);
        require_detection(ds->info(), "this test");
      }))
    return;
  const int64_t N = ds->info().num_samples, B = 10;
  const EpochPlan plan(42, N, B, LastBatch::Partial);
  const AugmentConfig aug{true, 2, true};
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const bool augment = epoch == 1;
    const uint64_t aug_seed = 1000 + uint64_t(epoch);
    std::vector<int64_t> mine;
    std::string lines;
    if (!step(MPI_COMM_WORLD, [&] {
          Prefetcher pf(*ds, 2, 1);
          std::vector<std::vector<int64_t>> asked;
          for (int64_t s = 0; s < plan.steps_per_epoch(); ++s) {
            const auto split = split_of(s, plan.batch_size(s), size);
            int64_t offset = 0;
            for (int r = 0; r < rank; ++r) offset += split[size_t(r)];
            asked.push_back(plan.slice(epoch, s, offset, split[size_t(rank)]));
            pf.submit(asked.back(), augment, aug, aug_seed);
          }
          for (const auto& idx : asked) {
            const Batch b = pf.next();
            ASSERT_EQ(b.indices, idx);
            ASSERT_EQ(b.boxes.samples(), int64_t(idx.size()));
            // The reference: this image alone, read directly, its boxes moved by its own crop and flip.
            for (size_t i = 0; i < idx.size(); ++i) {
              std::vector<uint8_t> px(size_t(ds->info().sample_bytes()));
              BoxList want;
              ds->read({idx[i]}, px.data(), nullptr, &want);
              if (augment) move_boxes(want, draw_crop_flip(std::vector<int64_t>{idx[i]}, true, aug, aug_seed), aug.crop_padding,
                           ds->info().height, ds->info().width);
              const std::vector<float> got(b.boxes.box(b.boxes.offsets[i]), b.boxes.box(b.boxes.offsets[i + 1]));
              ASSERT_EQ(got, want.rows) << "epoch " << epoch << ", image " << idx[i];
              if (dump && epoch == 0) {
                char buf[64];
                lines += std::to_string(idx[i]) + " " + std::to_string(want.count(0));
                for (float v : got) {
                  std::snprintf(buf, sizeof buf, " %.9g", double(v));
                  lines += buf;
                }
                lines += "\n";
              }
            }
            mine.insert(mine.end(), idx.begin(), idx.end());
          }
          if (dump && epoch == 0) {
            std::FILE* f = std::fopen((std::string(dump) + ".rank" + std::to_string(rank)).c_str(), "w");
            ASSERT_TRUE(f);
            std::fputs(lines.c_str(), f);
            std::fclose(f);
          }
        }))
      return;
    // Exactly once: every rank's indices, gathered, are a permutation of 0..N-1.
    int count = int(mine.size());
    std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size), 0);
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 1; r < size; ++r) displs[size_t(r)] = displs[size_t(r) - 1] + counts[size_t(r) - 1];
    std::vector<int64_t> all(size_t(displs.back() + counts.back()));
    MPI_Allgatherv(mine.data(), count, MPI_INT64_T, all.data(), counts.data(), displs.data(), MPI_INT64_T,
                   MPI_COMM_WORLD);
    std::vector<int> seen(size_t(N), 0);
    for (int64_t i : all) ++seen[size_t(i)];
    for (int64_t i = 0; i < N; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "epoch " << epoch << ": image " << i;
    if (!step(MPI_COMM_WORLD, [] {})) return;
  }
}
