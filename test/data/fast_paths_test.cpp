// The reader's direct paths (memory map for small samples, pread for large ones), its H5Dread fallback for
// compressed files, and the vectorised augmentation against a per-pixel reference.
#include <gtest/gtest.h>

#include <numeric>

#include "data/pack.hpp"
#include "data/rng.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
// Packs n synthetic samples of c×h×w and checks random, duplicate and sequential reads against the source.
void check_reads(int64_t n, int c, int h, int w, int shards, int64_t chunk, int gzip) {
  TempDir dir;
  auto src = open_synthetic(11, n, c, h, w, 3);
  PackOptions o;
  o.output = dir / "d.h5";
  o.shards = shards;
  o.progress = false;
  o.write.chunk_samples = chunk;
  o.write.gzip_level = gzip;
  pack(*src, o);
  auto ds = Dataset::open(o.output);
  const int64_t sb = int64_t(c) * h * w;
  Rng rng(5);
  std::vector<std::vector<int64_t>> requests;
  std::vector<int64_t> all(n);
  std::iota(all.begin(), all.end(), 0);
  requests.push_back(all);                           // sequential: coalesced copies
  requests.push_back({n - 1, 0, n - 1, n / 2, 0});  // last (partial) chunk, duplicates
  for (int t = 0; t < 8; ++t) {
    std::vector<int64_t> idx(1 + rng.below(uint64_t(n)));
    for (auto& i : idx) i = int64_t(rng.below(uint64_t(n)));
    requests.push_back(idx);
  }
  for (const auto& idx : requests) {
    std::vector<uint8_t> got(idx.size() * sb), want(sb);
    std::vector<int32_t> labels(idx.size());
    ds->read(idx, got.data(), labels.data());
    for (size_t k = 0; k < idx.size(); ++k) {
      int32_t l;
      src->get(idx[k], want.data(), &l);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin() + k * sb)) << "sample " << idx[k];
      ASSERT_EQ(labels[k], l) << "sample " << idx[k];
    }
  }
}
}  // namespace

TEST(ReaderPaths, SmallSamplesFromTheMap) { check_reads(97, 1, 6, 5, 2, 8, 0); }
TEST(ReaderPaths, LargeSamplesWithPread) { check_reads(9, 3, 80, 80, 1, 1, 0); }  // 19200 B: pread
TEST(ReaderPaths, LargeMultiSampleChunks) { check_reads(13, 3, 80, 80, 2, 3, 0); }  // 19200 B > 16 KiB
TEST(ReaderPaths, CompressedFallsBackToHdf5) { check_reads(61, 2, 5, 4, 3, 7, 4); }

TEST(Augment, MatchesPerPixelReference) {
  DatasetInfo info;
  info.channels = 2;
  info.height = 5;
  info.width = 7;
  info.mean = {0.25f, 0.5f};
  info.std = {0.5f, 0.2f};
  const int64_t n = 12, sb = info.sample_bytes();
  const auto raw = random_bytes(size_t(n * sb), 3);
  for (int padding : {0, 2, 9}) {  // 9: wider than the image, whole rows of padding
    AugmentConfig aug{true, padding, true};
    std::vector<float> got(n * sb);
    augment_batch(raw.data(), n, info, true, aug, 77, got.data(), 2);
    for (int64_t i = 0; i < n; ++i) {
      Rng rng(77, uint64_t(i));  // the draws augment_batch makes for sample i, in its order
      const int dy = int(rng.below(2 * padding + 1)) - padding, dx = int(rng.below(2 * padding + 1)) - padding;
      const bool flip = rng.below(2) == 1;
      for (int c = 0; c < 2; ++c)
        for (int y = 0; y < 5; ++y)
          for (int x = 0; x < 7; ++x) {
            const int sy = y + dy, sx = (flip ? 6 - x : x) + dx;
            const float px = (sy < 0 || sy >= 5 || sx < 0 || sx >= 7) ? 0.0f : float(raw[i * sb + (c * 5 + sy) * 7 + sx]);
            const float want = (px / 255.0f - info.mean[c]) / info.std[c];
            ASSERT_NEAR(got[i * sb + (c * 5 + y) * 7 + x], want, 1e-5f)
                << "padding " << padding << " sample " << i << " c" << c << " y" << y << " x" << x;
          }
    }
  }
}
