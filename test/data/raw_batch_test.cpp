// The GPU ranks' input path: draw_crop_flip's (y0, x0, flip) applied the way cuda::normalize_crop_flip
// applies them must give exactly augment_batch's floats, and sources in BatchForm::Raw hand back those draws
// with the bytes as read. (Prefetcher in Raw form: reader_test.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"
#include "train/batch_source.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
// The kernel's formula, written out per pixel: the output reads the zero-padded image at (y0+y, x0+x').
std::vector<float> reference(const std::vector<uint8_t>& raw, int64_t n, const DatasetInfo& info,
                             const std::vector<int32_t>& crop_flip, int pad) {
  const int C = info.channels, H = info.height, W = info.width;
  std::vector<float> out(raw.size());
  for (int64_t i = 0; i < n; ++i)
    for (int c = 0; c < C; ++c)
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          const int y0 = crop_flip[3 * i], x0 = crop_flip[3 * i + 1], flip = crop_flip[3 * i + 2];
          const int py = y0 + y, px = x0 + (flip ? W - 1 - x : x);  // in the padded image
          const int sy = py - pad, sx = px - pad;
          const bool inside = sy >= 0 && sy < H && sx >= 0 && sx < W;
          const float v = inside ? float(raw[((i * C + c) * H + sy) * W + sx]) : 0.0f;
          out[((i * C + c) * H + y) * W + x] = (v / 255.0f - info.mean[c]) / info.std[c];
        }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    ASSERT_NEAR(got[k], want[k], 1e-6f * std::max(1.0f, std::fabs(want[k]))) << what << " element " << k;
}

DatasetInfo small_info() {
  DatasetInfo info;
  info.channels = 3;
  info.height = 6;
  info.width = 5;
  info.mean = {0.4f, 0.5f, 0.45f};
  info.std = {0.3f, 0.5f, 0.25f};
  return info;
}
}  // namespace

TEST(DrawCropFlip, ReproducesAugmentBatch) {
  const DatasetInfo info = small_info();
  const int64_t n = 40, sb = info.sample_bytes();
  const auto raw = random_bytes(size_t(n * sb), 21);
  struct Case {
    bool augment;
    AugmentConfig aug;
    int want_pad;
  };
  const Case cases[] = {
      {true, {true, 4, true}, 4},    // windows up to mostly padding (6×5 image), and flips
      {true, {true, 2, false}, 2},   // crop only
      {true, {false, 4, true}, 0},   // flip only: no padding
      {false, {true, 4, true}, 0},   // evaluation: nothing drawn
  };
  for (const Case& t : cases) {
    const std::string what = "augment " + std::to_string(t.augment) + " crop " +
                             std::to_string(t.aug.random_crop) + " flip " + std::to_string(t.aug.hflip);
    const int pad = crop_pad(t.augment, t.aug);
    ASSERT_EQ(pad, t.want_pad) << what;
    const auto cf = draw_crop_flip_positions(n, t.augment, t.aug, 1234);
    ASSERT_EQ(cf.size(), size_t(3 * n)) << what;
    std::set<int> ys, xs, flips;
    for (int64_t i = 0; i < n; ++i) {
      for (int k : {0, 1}) ASSERT_TRUE(cf[3 * i + k] >= 0 && cf[3 * i + k] <= 2 * pad) << what;
      ys.insert(cf[3 * i]);
      xs.insert(cf[3 * i + 1]);
      flips.insert(cf[3 * i + 2]);
    }
    // 40 samples draw from 2·pad+1 offsets and 2 flips: each that is enabled must actually vary.
    const bool crops = t.augment && t.aug.random_crop, flipping = t.augment && t.aug.hflip;
    EXPECT_EQ(ys.size() > 1, crops) << what;
    EXPECT_EQ(xs.size() > 1, crops) << what;
    const std::set<int> want_flips = flipping ? std::set<int>{0, 1} : std::set<int>{0};
    EXPECT_EQ(flips, want_flips) << what;
    std::vector<float> got(n * sb);
    augment_batch(raw.data(), n, info, t.augment, t.aug, 1234, got.data(), 2);
    expect_close(got, reference(raw, n, info, cf, pad), what);
  }
  EXPECT_NE(draw_crop_flip_positions(n, true, {true, 4, true}, 1234), draw_crop_flip_positions(n, true, {true, 4, true}, 1235));
  EXPECT_THROW(crop_pad(true, {true, -1, false}), hetrain::Error);
}

TEST(SyntheticSource, RawFormHandsBackBytesAndDraws) {
  hetrain::train::SourceOptions opt;
  opt.augment = {true, 3, true};
  auto floats = hetrain::train::make_synthetic_source(50, 3, 6, 5, 4, 7, 10, opt);
  auto raws = hetrain::train::make_synthetic_source(50, 3, 6, 5, 4, 7, 10, opt);
  auto gen = open_synthetic(7, 60, 3, 6, 5, 4);  // the source's generator: sample i is gen[10 + i]
  const DatasetInfo& info = raws->info();
  const int64_t sb = info.sample_bytes();
  const std::vector<std::vector<int64_t>> requests = {{3, 49, 0, 3, 17}, {}, {8, 9, 10}};
  for (size_t r = 0; r < requests.size(); ++r)
    for (bool augment : {true, false}) {
      floats->submit(requests[r], augment, 50 + r);
      raws->submit(requests[r], augment, 50 + r, BatchForm::Raw);
      const Batch f = floats->next(), b = raws->next();
      const int64_t n = int64_t(requests[r].size());
      ASSERT_EQ(b.indices, requests[r]);
      ASSERT_EQ(b.labels, f.labels);
      ASSERT_EQ(b.raw.size(), size_t(n * sb));
      for (int64_t i = 0; i < n; ++i) {
        std::vector<uint8_t> want(sb);
        int32_t label;
        gen->get(10 + requests[r][i], want.data(), &label);
        ASSERT_TRUE(std::equal(want.begin(), want.end(), b.raw.begin() + i * sb)) << "sample " << i;
        ASSERT_EQ(b.labels[i], label);
      }
      ASSERT_EQ(b.crop_flip, draw_crop_flip(requests[r], augment, opt.augment, 50 + r));
      ASSERT_EQ(b.crop_pad, augment ? 3 : 0);
      expect_close(std::vector<float>(f.images.data(), f.images.data() + n * sb),
                   reference(b.raw, n, info, b.crop_flip, b.crop_pad), "request " + std::to_string(r));
    }
}
