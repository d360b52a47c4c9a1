// YOLOv5's augmentations of detection samples (src/data/detect_augment.cpp, docs/detection.md
// "Augmentation"): draws keyed by (seed, dataset index) only; a mosaic's quadrants by hand; the affine's
// boxes against its formula and against the pixels they mark; HSV against a colour model written here;
// the prefetcher composing a sample alike in any batch, position, thread count and batch form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
DetectAugment only(float mosaic, float scale, float translate, float hsv_v, float fliplr) {
  DetectAugment a;
  a.mosaic = mosaic;
  a.scale = scale;
  a.translate = translate;
  a.hsv_h = a.hsv_s = 0;
  a.hsv_v = hsv_v;
  a.fliplr = fliplr;
  return a;
}

DatasetInfo image_info(int channels, int height, int width, int64_t samples) {
  DatasetInfo info;
  info.channels = channels;
  info.height = height;
  info.width = width;
  info.num_samples = samples;
  info.has_boxes = true;
  return info;
}

BoxList boxes_of(const std::vector<std::vector<float>>& per_sample) {
  BoxList b;
  b.offsets.assign(1, 0);
  for (const auto& rows : per_sample) {
    b.rows.insert(b.rows.end(), rows.begin(), rows.end());
    b.offsets.push_back(int64_t(b.rows.size()) / kBoxFields);
  }
  return b;
}

// One sample composed on its own (its partners read as plan_detection_reads says).
struct Composed {
  std::vector<uint8_t> image;
  BoxList boxes;
};
Composed compose(const DetectAugment& a, uint64_t seed, int64_t index, const DatasetInfo& info,
                 const std::vector<std::vector<uint8_t>>& images, const std::vector<std::vector<float>>& boxes) {
  const DetectReads plan = plan_detection_reads(a, seed, {index}, info.num_samples, info.height, info.width);
  std::vector<uint8_t> read;
  std::vector<std::vector<float>> read_boxes;
  for (int64_t k : plan.read) {
    read.insert(read.end(), images[size_t(k)].begin(), images[size_t(k)].end());
    read_boxes.push_back(boxes[size_t(k)]);
  }
  Composed c;
  c.image.resize(size_t(info.sample_bytes()));
  augment_detection_batch(a, seed, {index}, plan, read.data(), boxes_of(read_boxes), info, c.image.data(), c.boxes, 1);
  return c;
}
}  // namespace

TEST(Yolov5Augment, DrawsDependOnTheSeedAndTheIndexOnly) {
  const DetectAugment a;
  int mosaics = 0, flips = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const DetectDraw d = draw_detection(a, 9, i, 50, 32, 48), again = draw_detection(a, 9, i, 50, 32, 48);
    EXPECT_EQ(std::vector<int64_t>(d.partners, d.partners + 3), std::vector<int64_t>(again.partners, again.partners + 3));
    EXPECT_EQ(d.zoom, again.zoom);
    ASSERT_TRUE(d.mosaic) << "mosaic 1 makes every sample a mosaic";
    for (int64_t p : d.partners) ASSERT_TRUE(p >= 0 && p < 50) << p;
    ASSERT_TRUE(d.centre_x >= 24 && d.centre_x < 72 && d.centre_y >= 16 && d.centre_y < 48);
    ASSERT_TRUE(d.zoom >= 0.5 && d.zoom <= 1.5 && std::fabs(d.shift_x) <= 0.1 && std::fabs(d.shift_y) <= 0.1);
    ASSERT_TRUE(std::fabs(d.gain[0] - 1) <= 0.015 && std::fabs(d.gain[1] - 1) <= 0.7 && std::fabs(d.gain[2] - 1) <= 0.4);
    flips += d.flip;
    // Another epoch's seed draws anew; turning one augmentation off leaves the others' draws alone.
    const DetectDraw next_epoch = draw_detection(a, 10, i, 50, 32, 48);
    mosaics += next_epoch.partners[0] != d.partners[0];
    DetectAugment no_hsv = a;
    no_hsv.hsv_h = no_hsv.hsv_s = no_hsv.hsv_v = 0;
    const DetectDraw h = draw_detection(no_hsv, 9, i, 50, 32, 48);
    ASSERT_EQ(h.partners[2], d.partners[2]);
    ASSERT_EQ(h.zoom, d.zoom);
    ASSERT_EQ(h.flip, d.flip);
    ASSERT_EQ(h.gain[2], 1.0);
  }
  EXPECT_GT(mosaics, 350);  // partners differ between epochs (1 in 50 coincide)
  EXPECT_GT(flips, 150);
  EXPECT_LT(flips, 250);
  const DetectAugment none = only(0, 0, 0, 0, 0);
  const DetectDraw d = draw_detection(none, 9, 3, 50, 32, 48);
  EXPECT_FALSE(d.mosaic);
  EXPECT_FALSE(d.flip);
  EXPECT_EQ(d.zoom, 1.0);
  EXPECT_EQ(plan_detection_reads(none, 9, {4, 2}, 50, 32, 48).read, (std::vector<int64_t>{4, 2}));
}

TEST(Yolov5Augment, OffLeavesTheSampleAsItIs) {
  const DatasetInfo info = image_info(3, 6, 8, 2);
  const std::vector<std::vector<uint8_t>> images = {random_bytes(144, 1), random_bytes(144, 2)};
  const std::vector<std::vector<float>> boxes = {{1, 0.5f, 0.5f, 0.5f, 0.5f}, {}};
  const Composed c = compose(only(0, 0, 0, 0, 0), 5, 0, info, images, boxes);
  EXPECT_EQ(c.image, images[0]);
  EXPECT_EQ(c.boxes.rows, boxes[0]);
}

TEST(Yolov5Augment, MosaicPlacesTheFourImagesAroundItsCentre) {
  // 4 flat images 10, 20, 30, 40, each with one box over all of it; no zoom or shift, so the output is the
  // canvas's middle H × W: output (x, y) shows canvas (x + W/2, y + H/2).
  const int H = 8, W = 10;
  const DatasetInfo info = image_info(1, H, W, 4);
  std::vector<std::vector<uint8_t>> images;
  std::vector<std::vector<float>> boxes;
  for (int k = 0; k < 4; ++k) {
    images.emplace_back(size_t(H * W), uint8_t(10 * (k + 1)));
    boxes.push_back({float(k), 0.5f, 0.5f, 1.0f, 1.0f});
  }
  const DetectAugment a = only(1, 0, 0, 0, 0);
  int checked = 0;
  for (int64_t index = 0; index < 4; ++index) {
    const DetectDraw d = draw_detection(a, 7, index, 4, H, W);
    const int xc = int(d.centre_x), yc = int(d.centre_y);
    const Composed c = compose(a, 7, index, info, images, boxes);
    // Quadrant images by position: the sample top-left, its partners top-right, bottom-left, bottom-right.
    const int64_t quadrant_image[4] = {index, d.partners[0], d.partners[1], d.partners[2]};
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x) {
        const int cx = x + W / 2, cy = y + H / 2;
        const int q = (cx >= xc ? 1 : 0) + (cy >= yc ? 2 : 0);
        // Each image covers W × H next to the centre; beyond that the canvas is grey.
        const bool covered = (cx >= xc ? cx < xc + W : cx >= xc - W) && (cy >= yc ? cy < yc + H : cy >= yc - H);
        const int want = covered ? 10 * int(quadrant_image[q] + 1) : 114;
        ASSERT_EQ(int(c.image[size_t(y * W + x)]), want) << "index " << index << " pixel (" << y << ", " << x << ")";
        ++checked;
      }
    // Each image's box, in quadrant order: its part inside the output, kept when over 2 pixels wide and
    // high and over 10 % of the image.
    std::vector<float> want;
    for (int q = 0; q < 4; ++q) {
      const double x0 = (q % 2 ? xc : xc - W) - W / 2.0, y0 = (q / 2 ? yc : yc - H) - H / 2.0;
      const double x1 = std::clamp(x0, 0.0, double(W)), x2 = std::clamp(x0 + W, 0.0, double(W));
      const double y1 = std::clamp(y0, 0.0, double(H)), y2 = std::clamp(y0 + H, 0.0, double(H));
      if (x2 - x1 <= 2 || y2 - y1 <= 2 || (x2 - x1) * (y2 - y1) <= 0.1 * W * H) continue;
      want.insert(want.end(), {float(quadrant_image[q]), float((x1 + x2) / 2 / W), float((y1 + y2) / 2 / H),
                               float((x2 - x1) / W), float((y2 - y1) / H)});
    }
    ASSERT_EQ(c.boxes.rows.size(), want.size()) << "index " << index;
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(c.boxes.rows[k], want[k], 1e-6) << "index " << index;
  }
  EXPECT_EQ(checked, 4 * H * W);
}

TEST(Yolov5Augment, AffineMovesBoxesByItsFormula) {
  // No mosaic: x' = zoom·(x − W/2) + (1/2 + shift_x)·W; a box well inside stays whole (small zooms).
  const int H = 40, W = 60;
  const DatasetInfo info = image_info(1, H, W, 1);
  const std::vector<std::vector<uint8_t>> images = {std::vector<uint8_t>(size_t(H * W), 0)};
  const std::vector<std::vector<float>> boxes = {{2, 0.5f, 0.4f, 0.2f, 0.3f}};
  DetectAugment a = only(0, 0.2f, 0.05f, 0, 0);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const DetectDraw d = draw_detection(a, seed, 0, 1, H, W);
    const Composed c = compose(a, seed, 0, info, images, boxes);
    ASSERT_EQ(c.boxes.count(0), 1);
    const float* b = c.boxes.box(0);
    EXPECT_NEAR(b[1], (d.zoom * (0.5 * W - W / 2.0) + (0.5 + d.shift_x) * W) / W, 1e-5);
    EXPECT_NEAR(b[2], (d.zoom * (0.4 * H - H / 2.0) + (0.5 + d.shift_y) * H) / H, 1e-5);
    EXPECT_NEAR(b[3], d.zoom * 0.2, 1e-5);
    EXPECT_NEAR(b[4], d.zoom * 0.3, 1e-5);
  }
}

namespace {
// Black images with a white rectangle under each box (2 per image, sizes varying by index).
class RectSource : public SampleSource {
 public:
  RectSource(int n, int height, int width) : n_(n) {
    meta.channels = 1;
    meta.height = height;
    meta.width = width;
    meta.num_classes = 2;
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
    const int xs[2][2] = {{2 + int(i % 5), 14 + int(i % 7)}, {W / 2 + 2, W - 3 - int(i % 4)}};
    const int ys[2][2] = {{3, H / 2 - int(i % 3)}, {H / 2 + 1 + int(i % 2), H - 2}};
    for (int k = 0; k < 2; ++k) {
      for (int y = ys[k][0]; y < ys[k][1]; ++y)
        for (int x = xs[k][0]; x < xs[k][1]; ++x) image[y * W + x] = 255;
      boxes.insert(boxes.end(), {float(k), float((xs[k][0] + xs[k][1]) / 2.0 / W), float((ys[k][0] + ys[k][1]) / 2.0 / H),
                                 float(double(xs[k][1] - xs[k][0]) / W), float(double(ys[k][1] - ys[k][0]) / H)});
    }
    *label = 0;
  }

 private:
  int n_;
};

// n such images of H × W packed into a file of `dir`, opened.
std::unique_ptr<Dataset> packed_rects(const TempDir& dir, int n, int height, int width) {
  RectSource src(n, height, width);
  PackOptions o;
  o.output = dir / "r.h5";
  o.progress = false;
  pack(src, o);
  return Dataset::open(dir / "r.h5");
}
}  // namespace

TEST(Yolov5Augment, BoxesMarkTheirRectanglesAfterMosaicAffineAndFlip) {
  TempDir dir;
  const int H = 32, W = 48, n = 30;
  auto ds = packed_rects(dir, n, H, W);
  Prefetcher pf(*ds, 2, 2);
  AugmentConfig aug;
  aug.detection = true;
  aug.detect = only(0.8f, 0.3f, 0.1f, 0, 0.5f);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  pf.submit(idx, true, aug, 31, BatchForm::Raw);
  const Batch b = pf.next();
  int64_t kept = 0, grey = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* img = b.raw.data() + i * H * W;
    grey += std::count(img, img + H * W, uint8_t(114));
    // Inside every kept box (1 pixel in from its edges, past the bilinear blend) the rectangle is white.
    for (int64_t k = b.boxes.offsets[i]; k < b.boxes.offsets[i + 1]; ++k, ++kept) {
      const float* r = b.boxes.box(k);
      const double x1 = (r[1] - r[3] / 2) * W, x2 = (r[1] + r[3] / 2) * W;
      const double y1 = (r[2] - r[4] / 2) * H, y2 = (r[2] + r[4] / 2) * H;
      ASSERT_GT(x2 - x1, 2.0);
      ASSERT_GT(y2 - y1, 2.0);
      for (int y = int(std::ceil(y1 + 1)); y < int(std::floor(y2 - 1)); ++y)
        for (int x = int(std::ceil(x1 + 1)); x < int(std::floor(x2 - 1)); ++x)
          ASSERT_EQ(int(img[y * W + x]), 255) << "sample " << i << " box " << k << " pixel (" << y << ", " << x << ")";
    }
  }
  EXPECT_GT(kept, n);      // most rectangles survive
  EXPECT_GT(grey, H * W);  // mosaics and shifts show the grey border
}

TEST(Yolov5Augment, HsvGainsFollowTheColourModel) {
  // Hue, saturation and value scaled in an 8-bit HSV model (hue in degrees / 2): checked against Python's
  // colorsys-style float conversion, to within the model's rounding (a few levels).
  const int H = 4, W = 16;
  const DatasetInfo info = image_info(3, H, W, 1);
  std::vector<uint8_t> image = random_bytes(size_t(3 * H * W), 17);
  for (int x = 0; x < 4; ++x) image[x] = image[H * W + x] = image[2 * H * W + x] = uint8_t(60 * x);  // greys
  DetectAugment a = only(0, 0, 0, 0.4f, 0);
  a.hsv_h = 0.015f;
  a.hsv_s = 0.7f;
  int compared = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const DetectDraw d = draw_detection(a, seed, 0, 1, H, W);
    const Composed c = compose(a, seed, 0, info, {image}, {{}});
    for (int p = 0; p < H * W; ++p) {
      const double r = image[p] / 255.0, g = image[H * W + p] / 255.0, bl = image[2 * H * W + p] / 255.0;
      const double mx = std::max({r, g, bl}), mn = std::min({r, g, bl});
      double hue = 0;
      if (mx > mn) {
        if (mx == r) hue = std::fmod((g - bl) / (mx - mn) + 6, 6.0);
        else if (mx == g) hue = (bl - r) / (mx - mn) + 2;
        else hue = (r - g) / (mx - mn) + 4;
      }
      const double s = mx > 0 ? (mx - mn) / mx : 0;
      // The model stores the hue in 2-degree steps (wrapping at 360 degrees), and each gained value as a
      // whole level, cut down (YOLOv5's lookup tables).
      const double h2 = std::floor(std::fmod(std::round(hue * 30) * d.gain[0], 180.0)) / 30.0;
      const double s2 = std::floor(std::min(255.0, std::round(s * 255) * d.gain[1])) / 255;
      const double v2 = std::floor(std::min(255.0, std::round(mx * 255) * d.gain[2])) / 255;
      const double want[3] = {
          v2 * (1 - s2 * std::max(0.0, std::min({std::fmod(5 + h2, 6.0), 4 - std::fmod(5 + h2, 6.0), 1.0}))),
          v2 * (1 - s2 * std::max(0.0, std::min({std::fmod(3 + h2, 6.0), 4 - std::fmod(3 + h2, 6.0), 1.0}))),
          v2 * (1 - s2 * std::max(0.0, std::min({std::fmod(1 + h2, 6.0), 4 - std::fmod(1 + h2, 6.0), 1.0})))};
      for (int ch = 0; ch < 3; ++ch, ++compared)
        ASSERT_NEAR(c.image[size_t(ch * H * W + p)], want[ch] * 255, 3.0)
            << "seed " << seed << " pixel " << p << " channel " << ch;
      if (p < 4) {
        ASSERT_TRUE(c.image[p] == c.image[H * W + p] && c.image[p] == c.image[2 * H * W + p]) << "grey stays grey";
      }
    }
  }
  EXPECT_EQ(compared, 5 * 3 * H * W);
}

TEST(Yolov5Augment, ASampleIsComposedAlikeInAnyBatchPositionThreadCountAndForm) {
  TempDir dir;
  const int H = 24, W = 32, n = 20;
  auto ds = packed_rects(dir, n, H, W);
  AugmentConfig aug;
  aug.detection = true;  // YOLOv5's defaults, every augmentation on
  Prefetcher one(*ds, 1, 1), three(*ds, 2, 3);
  const std::vector<int64_t> a = {5, 1, 9, 12}, b = {9, 7, 3, 5, 18, 12};
  one.submit(a, true, aug, 404, BatchForm::Raw);
  three.submit(b, true, aug, 404, BatchForm::Raw);
  three.submit(b, true, aug, 404, BatchForm::Float);
  const Batch x = one.next(), y = three.next(), yf = three.next();
  const int64_t sb = H * W;
  for (auto [ia, ib] : {std::pair{0, 3}, std::pair{2, 0}, std::pair{3, 5}}) {
    EXPECT_TRUE(std::equal(x.raw.begin() + ia * sb, x.raw.begin() + (ia + 1) * sb, y.raw.begin() + ib * sb))
        << "sample " << a[ia];
    EXPECT_EQ(std::vector<float>(x.boxes.rows.begin() + x.boxes.offsets[ia] * kBoxFields,
                                 x.boxes.rows.begin() + x.boxes.offsets[ia + 1] * kBoxFields),
              std::vector<float>(y.boxes.rows.begin() + y.boxes.offsets[ib] * kBoxFields,
                                 y.boxes.rows.begin() + y.boxes.offsets[ib + 1] * kBoxFields));
  }
  // The float form is the same bytes normalised.
  const DatasetInfo& info = ds->info();
  for (int64_t k = 0; k < int64_t(b.size()) * sb; ++k)
    ASSERT_NEAR(yf.images.data()[k], (y.raw[size_t(k)] / 255.0f - info.mean[0]) / info.std[0], 1e-5f);
  EXPECT_EQ(yf.boxes.rows, y.boxes.rows);
  // Another epoch's seed composes differently.
  one.submit(a, true, aug, 405, BatchForm::Raw);
  EXPECT_NE(one.next().raw, x.raw);
}

TEST(Yolov5Augment, OptionsOutOfRangeAreRefusedByName) {
  DetectAugment a;
  a.mosaic = 1.5f;
  expect_error([&] { a.check(); }, {"--mosaic must be a probability in [0, 1], got 1.5"});
  a = DetectAugment();
  a.scale = 1.0f;
  expect_error([&] { a.check(); }, {"--affine-scale must be in [0, 1)"});
  a = DetectAugment();
  a.hsv_v = -0.1f;
  expect_error([&] { a.check(); }, {"--hsv-v"});
  DetectAugment().check();
}
