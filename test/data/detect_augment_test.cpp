// Boxes move with the pixels (docs/detection.md, "Augmentation"): move_boxes by hand-computed cases, and
// the Prefetcher's boxes against the bright rectangles they mark, after random crops and flips.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
BoxList one_sample(std::vector<float> rows) {
  BoxList b;
  b.rows = std::move(rows);
  b.offsets = {0, int64_t(b.rows.size()) / kBoxFields};
  return b;
}

// Images of zeros with a 255 rectangle under each box; boxes on whole pixels, at least `margin` pixels from
// every border (so a crop of that padding never clips them).
class RectSource : public SampleSource {
 public:
  RectSource(int n, int height, int width, int margin) : n_(n), margin_(margin) {
    meta.channels = 1;
    meta.height = height;
    meta.width = width;
    meta.num_classes = 3;
    meta.has_boxes = true;
  }
  int64_t size() const override { return n_; }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    std::vector<float> b;
    get_boxed(i, image, label, b);
  }
  void get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const override {
    const int H = meta.height, W = meta.width;
    std::fill(image, image + H * W, 0);
    boxes.clear();
    // Two boxes side by side: [m, m + 3 + i%5) and [W/2, W/2 + 2 + i%3) in x, rows varying with i.
    const int xs[2][2] = {{margin_, margin_ + 3 + int(i % 5)}, {W / 2, W / 2 + 2 + int(i % 3)}};
    const int ys[2][2] = {{margin_ + int(i % 4), H / 2}, {H / 2 + 1, H - margin_ - int(i % 2)}};
    for (int k = 0; k < 2; ++k) {
      for (int y = ys[k][0]; y < ys[k][1]; ++y)
        for (int x = xs[k][0]; x < xs[k][1]; ++x) image[y * W + x] = 255;
      boxes.insert(boxes.end(), {float(k), float((xs[k][0] + xs[k][1]) / 2.0 / W), float((ys[k][0] + ys[k][1]) / 2.0 / H),
                                 float(double(xs[k][1] - xs[k][0]) / W), float(double(ys[k][1] - ys[k][0]) / H)});
    }
    *label = 0;
  }

 private:
  int n_, margin_;
};
}  // namespace

TEST(DetectAugment, FlipMirrorsCentreExactly) {
  BoxList b = one_sample({2, 0.3f, 0.4f, 0.2f, 0.1f, 1, 0.75f, 0.5f, 0.5f, 1.0f});
  move_boxes(b, {0, 0, 1}, 0, 10, 20);
  EXPECT_EQ(b.rows, (std::vector<float>{2, 1.0f - 0.3f, 0.4f, 0.2f, 0.1f, 1, 0.25f, 0.5f, 0.5f, 1.0f}));
  BoxList same = one_sample({2, 0.3f, 0.4f, 0.2f, 0.1f});
  move_boxes(same, {4, 4, 0}, 4, 10, 20);  // the crop window at the centre: nothing moves
  EXPECT_EQ(same.rows, (std::vector<float>{2, 0.3f, 0.4f, 0.2f, 0.1f}));
}

TEST(DetectAugment, CropShiftsClipsAndDropsBoxes) {
  // 100 x 100 image, padding 4; crop corner (y0, x0) = (4 + 5, 4 + 10): the content moves 10 px left, 5 up.
  BoxList b;
  b.rows = {
      1, 0.50f, 0.50f, 0.20f, 0.20f,  // x 40..60, y 40..60 -> x 30..50, y 35..55
      0, 0.10f, 0.50f, 0.20f, 0.20f,  // x 0..20 -> -10..10: clipped to 0..10 (half its area stays)
      2, 0.05f, 0.50f, 0.10f, 0.20f,  // x 0..10 -> -10..0: nothing left, dropped
      0, 0.11f, 0.50f, 0.02f, 0.20f,  // x 10..12 -> 0..2: whole, kept
  };
  b.offsets = {0, 1, 4};
  move_boxes(b, {9, 14, 0, 9, 14, 1}, 4, 100, 100);
  ASSERT_EQ(b.offsets, (std::vector<int64_t>{0, 1, 3}));
  const std::vector<float> want = {1, 0.40f, 0.45f, 0.20f, 0.20f,
                                   0, 1 - 0.05f, 0.45f, 0.10f, 0.20f,   // flipped: x 90..100
                                   0, 1 - 0.01f, 0.45f, 0.02f, 0.20f};  // flipped: x 98..100
  ASSERT_EQ(b.rows.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(b.rows[k], want[k], 1e-6) << "value " << k;
  // Less than 10 % of the area inside: dropped. x 0..20, shifted 19 px left: 1 px (5 %) remains.
  BoxList small = one_sample({0, 0.10f, 0.50f, 0.20f, 0.20f});
  move_boxes(small, {4, 23, 0}, 4, 100, 100);
  EXPECT_EQ(small.offsets, (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(small.rows.empty());
}

TEST(DetectAugment, PrefetcherBoxesMarkTheMovedRectanglesInBothForms) {
  TempDir dir;
  const int H = 24, W = 32, pad = 4, n = 40;
  RectSource src(n, H, W, pad);
  PackOptions o;
  o.output = dir / "r.h5";
  o.progress = false;
  pack(src, o);
  auto ds = Dataset::open(dir / "r.h5");
  Prefetcher pf(*ds, 2, 2);
  const AugmentConfig aug{true, pad, true};
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::reverse(idx.begin(), idx.end());
  pf.submit(idx, true, aug, 77, BatchForm::Float);
  pf.submit(idx, true, aug, 77, BatchForm::Raw);
  const Batch f = pf.next(), r = pf.next();
  EXPECT_EQ(f.boxes.rows, r.boxes.rows);
  EXPECT_EQ(f.boxes.offsets, r.boxes.offsets);
  ASSERT_EQ(f.boxes.samples(), n);
  const auto cf = draw_crop_flip(idx, true, aug, 77);
  int flipped = 0, shifted = 0;
  const float bright = (1.0f - ds->info().mean[0]) / ds->info().std[0];
  for (int64_t i = 0; i < n; ++i) {
    flipped += cf[3 * i + 2];
    shifted += cf[3 * i] != pad || cf[3 * i + 1] != pad;
    ASSERT_EQ(f.boxes.count(i), 2) << "no box may be clipped here";
    // A pixel is bright exactly when its centre lies inside one of the sample's boxes.
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        bool inside = false;
        for (int64_t k = f.boxes.offsets[i]; k < f.boxes.offsets[i + 1]; ++k) {
          const float* b = f.boxes.box(k);
          const double cx = (x + 0.5) / W, cy = (y + 0.5) / H;
          inside |= std::fabs(cx - b[1]) < b[3] / 2 && std::fabs(cy - b[2]) < b[4] / 2;
        }
        const float v = f.images.data()[(i * H + y) * W + x];
        ASSERT_EQ(std::fabs(v - bright) < 1e-3f, inside) << "sample " << idx[i] << " pixel (" << y << ", " << x << ")";
      }
  }
  EXPECT_GT(flipped, 5);
  EXPECT_GT(shifted, 5);
}
