// The detection packers (docs/detection.md): generated scenes are deterministic, their boxes bound the
// pasted items tightly; COCO-format data is letterboxed with its boxes, classes mapped, bad entries named.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
// 30 items of 28 x 28: black, with a bright (200..255) rectangle of item-dependent size; class i % 3.
std::shared_ptr<const SampleSource> bright_items(const TempDir& dir) {
  const int n = 30;
  std::vector<uint8_t> px(size_t(n) * 28 * 28, 0), labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = uint8_t(i % 3);
    for (int y = 3 + i % 5; y < 20 + i % 7; ++y)
      for (int x = 2 + i % 4; x < 15 + i % 11; ++x) px[(size_t(i) * 28 + y) * 28 + x] = uint8_t(200 + (x * y) % 56);
  }
  write_idx(dir / "items", {uint32_t(n), 28, 28}, px, false);
  write_idx(dir / "labels", {uint32_t(n)}, labels, false);
  return open_idx(dir / "items", dir / "labels", 3, {"a", "b", "c"});
}

struct Scene {
  std::vector<uint8_t> image;
  std::vector<float> boxes;
  int32_t label = -1;
};
Scene scene(const SampleSource& src, int64_t i) {
  Scene s;
  s.image.resize(size_t(src.meta.channels) * src.meta.height * src.meta.width);
  src.get_boxed(i, s.image.data(), &s.label, s.boxes);
  return s;
}
}  // namespace

TEST(DetectSynthetic, SameSeedSameScenesOtherSeedOrSplitOthers) {
  TempDir dir;
  auto items = bright_items(dir);
  DetectSyntheticOptions o;
  o.count = 6;
  o.size = 96;
  auto a = open_detect_synthetic(items, o), b = open_detect_synthetic(items, o);
  DetectSyntheticOptions other = o;
  other.seed = 2;
  DetectSyntheticOptions test_split = o;
  test_split.split_tag = 1;
  auto c = open_detect_synthetic(items, other), d = open_detect_synthetic(items, test_split);
  for (int64_t i = 0; i < 6; ++i) {
    const Scene sa = scene(*a, i), sb = scene(*b, i), sc = scene(*c, i), sd = scene(*d, i);
    EXPECT_EQ(sa.image, sb.image);
    EXPECT_EQ(sa.boxes, sb.boxes);
    EXPECT_NE(sa.image, sc.image);
    EXPECT_NE(sa.image, sd.image);
  }
  EXPECT_TRUE(a->meta.has_boxes);
  EXPECT_EQ(a->meta.class_names, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(DetectSynthetic, BoxesBoundTheBrightItemsTightly) {
  TempDir dir;
  DetectSyntheticOptions o;
  o.count = 40;
  o.size = 160;
  o.max_items = 5;
  for (int channels : {1, 3}) {
    o.channels = channels;
    auto src = open_detect_synthetic(bright_items(dir), o);
    int64_t boxes = 0;
    const int S = o.size;
    for (int64_t i = 0; i < o.count; ++i) {
      const Scene s = scene(*src, i);
      const int64_t m = int64_t(s.boxes.size()) / kBoxFields;
      ASSERT_GE(m, 1);
      ASSERT_LE(m, o.max_items);
      boxes += m;
      EXPECT_EQ(s.label, label_of_boxes(s.boxes));
      // Noise stays below 65 and the letterbox pad is 114 in every channel; items are at least 200, tinted
      // by 0.4 or more: a pixel above 64 in some channel that is not pad belongs to an item, and must lie in
      // a box (one output pixel of slack for the resampling).
      std::vector<int> hits(size_t(m), 0);
      for (int y = 0; y < S; ++y)
        for (int x = 0; x < S; ++x) {
          int v = 0;
          bool pad = true;
          for (int c = 0; c < channels; ++c) {
            const int p = s.image[(size_t(c) * S + y) * S + x];
            v = std::max(v, p);
            pad &= p == 114;
          }
          if (v <= 64 || pad) continue;
          bool inside = false;
          for (int64_t k = 0; k < m; ++k) {
            const float* b = &s.boxes[size_t(k) * kBoxFields];
            const bool in = std::fabs((x + 0.5) - b[1] * S) <= b[3] * S / 2 + 1 &&
                            std::fabs((y + 0.5) - b[2] * S) <= b[4] * S / 2 + 1;
            if (in) ++hits[size_t(k)];
            inside |= in;
          }
          ASSERT_TRUE(inside) << "scene " << i << ": bright pixel (" << y << ", " << x << ") in no box";
        }
      for (int64_t k = 0; k < m; ++k) {
        const float* b = &s.boxes[size_t(k) * kBoxFields];
        EXPECT_GT(hits[size_t(k)], 0) << "scene " << i << ": box " << k << " holds no item";
        // Tight: the bright rectangle fills most of its box (its dim, resampled rim is at most ~2 px wide).
        EXPECT_GE(hits[size_t(k)], 0.5 * (b[3] * S - 2) * (b[4] * S - 2)) << "scene " << i << ": box " << k;
        // Items are 28 px at 1-3x scale on canvases of at most 320 px, letterboxed to S.
        EXPECT_LE(b[3], 84.0 / 128 + 1e-6);
      }
    }
    EXPECT_GT(boxes, 2 * o.count) << "about 3 items per scene expected (1-5)";
  }
}

TEST(DetectSynthetic, PacksAndReadsBackAsADetectionDataset) {
  TempDir dir;
  DetectSyntheticOptions o;
  o.count = 25;
  o.size = 64;
  auto src = open_detect_synthetic(bright_items(dir), o);
  PackOptions p;
  p.output = dir / "d.h5";
  p.progress = false;
  p.shards = 2;
  const PackResult r = pack(*src, p);
  auto ds = Dataset::open(dir / "d.h5");
  EXPECT_EQ(ds->info().num_boxes, r.train_boxes);
  EXPECT_EQ(ds->info().height, 64);
  const BoxList all = ds->all_boxes();
  for (int64_t i = 0; i < o.count; ++i) {
    const Scene s = scene(*src, i);
    EXPECT_EQ(std::vector<float>(all.box(all.offsets[i]), all.box(all.offsets[i + 1])), s.boxes) << "sample " << i;
  }
}

TEST(DetectSynthetic, BadOptionsAreRefused) {
  TempDir dir;
  auto items = bright_items(dir);
  DetectSyntheticOptions o;
  o.count = 0;
  expect_error([&] { open_detect_synthetic(items, o); }, {"--count must be positive"});
  o.count = 1;
  o.max_items = 0;
  expect_error([&] { open_detect_synthetic(items, o); }, {"--max-items must be at least 1"});
  o.max_items = 2;
  o.channels = 2;
  expect_error([&] { open_detect_synthetic(items, o); }, {"--channels must be 1 or 3"});
}

namespace {
// A COCO-format set written by the test: image id 7 is 80 x 40 with two boxes (and a crowd region, which is
// skipped), image id 2 is 50 x 50 without annotations; three categories with non-contiguous ids.
std::string coco_json(const std::string& annotations) {
  return R"({"images": [{"id": 7, "file_name": "a.png", "width": 80, "height": 40},
                        {"id": 2, "file_name": "b.png", "width": 50, "height": 50}],
             "categories": [{"id": 18, "name": "dog"}, {"id": 3, "name": "car"}, {"id": 90, "name": "toothbrush"}],
             "annotations": )" + annotations + "}";
}
const char* kGoodAnnotations = R"([
  {"id": 1, "image_id": 7, "category_id": 18, "bbox": [10, 5, 20, 10], "iscrowd": 0},
  {"id": 2, "image_id": 7, "category_id": 3, "bbox": [60, 20, 20, 20.5], "iscrowd": 0},
  {"id": 3, "image_id": 7, "category_id": 90, "bbox": [0, 0, 80, 40], "iscrowd": 1}])";

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

void write_coco_images(const TempDir& dir) {
  std::filesystem::create_directories(dir / "img");
  write_png(dir / "img/a.png", 40, 80, 3, std::vector<uint8_t>(40 * 80 * 3, 10));
  write_png(dir / "img/b.png", 50, 50, 3, std::vector<uint8_t>(50 * 50 * 3, 200));
}
}  // namespace

TEST(Coco, PacksLetterboxedImagesWithNormalisedBoxesAndContiguousClasses) {
  TempDir dir;
  write_coco_images(dir);
  write_text(dir / "instances.json", coco_json(kGoodAnnotations));
  auto src = open_coco(dir / "img", dir / "instances.json", 40, 3);
  EXPECT_EQ(src->meta.class_names, (std::vector<std::string>{"car", "dog", "toothbrush"}));
  ASSERT_EQ(src->size(), 2);
  PackOptions p;
  p.output = dir / "coco.h5";
  p.progress = false;
  const PackResult r = pack(*src, p);
  EXPECT_EQ(r.train_boxes, 2);
  auto ds = Dataset::open(dir / "coco.h5");
  ASSERT_TRUE(ds->has_boxes());
  EXPECT_EQ(ds->info().num_classes, 3);
  std::vector<uint8_t> px(2 * 3 * 40 * 40);
  std::vector<int32_t> labels(2);
  BoxList b;
  ds->read({0, 1}, px.data(), labels.data(), &b);
  // Images by id: b.png (id 2, no boxes) first, then a.png (id 7).
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 0, 2}));
  // a.png scaled by 1/2 to 40 x 20, 10 px of letterbox above and below. The dog: x 10..30 → 5..15,
  // y 5..15 → 12.5..17.5; the car: x 60..80 → 30..40, y 20..40 (40.5 clipped to 40) → 20..30; over 40.
  const std::vector<float> want = {1, 0.25f, 0.375f, 0.25f, 0.125f, 0, 0.875f, 0.625f, 0.25f, 0.25f};
  ASSERT_EQ(b.rows.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(b.rows[k], want[k], 1e-6) << "value " << k;
  EXPECT_EQ(labels[1], 0) << "the label is the class of the largest box (the car)";
  const uint8_t* a = px.data() + 3 * 40 * 40;
  EXPECT_EQ(a[0], 114) << "letterbox pad";
  EXPECT_EQ(a[20 * 40 + 20], 10) << "image";
  EXPECT_EQ(px[20 * 40 + 20], 200) << "b.png fills its square output";
}

TEST(Coco, BadEntriesAreNamed) {
  TempDir dir;
  write_coco_images(dir);
  struct Case {
    std::string annotations;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {R"([{"id": 5, "image_id": 8, "category_id": 3, "bbox": [1, 1, 2, 2]}])",
       {"annotations[0] (id 5)", "image_id 8 is not among the images"}},
      {R"([{"id": 1, "image_id": 7, "category_id": 3, "bbox": [1, 1, 2, 2]},
           {"id": 6, "image_id": 7, "category_id": 4, "bbox": [1, 1, 2, 2]}])",
       {"annotations[1] (id 6)", "category_id 4 is not among the categories"}},
      {R"([{"id": 9, "image_id": 7, "category_id": 3, "bbox": [1, 1, 0, 2]}])", {"annotations[0] (id 9)", "zero size"}},
      {R"([{"id": 9, "image_id": 7, "category_id": 3, "bbox": [70, 1, 20, 2]}])",
       {"annotations[0] (id 9)", "lies outside its 80x40 image"}},
      {R"([{"id": 9, "image_id": 7, "category_id": 3}])", {"annotations[0] (id 9) has no 'bbox'"}},
      {R"([{"id": 9, "image_id": 7, "category_id": 3, "bbox": "wide"}])", {"annotations[0] (id 9)", "'bbox' has the wrong type"}},
  };
  for (const auto& c : cases) {
    write_text(dir / "bad.json", coco_json(c.annotations));
    auto needles = c.needles;
    needles.push_back("bad.json");
    expect_error([&] { open_coco(dir / "img", dir / "bad.json", 32, 3); }, needles);
  }
  write_text(dir / "broken.json", "{\"images\": [");
  expect_error([&] { open_coco(dir / "img", dir / "broken.json", 32, 3); }, {"broken.json", "not valid JSON"});
  write_text(dir / "other.json", "{\"licenses\": []}");
  expect_error([&] { open_coco(dir / "img", dir / "other.json", 32, 3); }, {"other.json", "no 'categories' array"});
  // An image that is missing, or not the size the annotations say: named when packing reaches it.
  write_text(dir / "good.json", coco_json(kGoodAnnotations));
  std::filesystem::remove(dir / "img/b.png");
  std::vector<uint8_t> px(3 * 32 * 32);
  int32_t label;
  std::vector<float> boxes;
  auto src = open_coco(dir / "img", dir / "good.json", 32, 3);
  expect_error([&] { src->get_boxed(0, px.data(), &label, boxes); }, {"b.png", "cannot open"});
  write_png(dir / "img/b.png", 30, 50, 3, std::vector<uint8_t>(30 * 50 * 3, 1));
  expect_error([&] { src->get_boxed(0, px.data(), &label, boxes); },
               {"b.png", "the image is 50x30 but the annotations say 50x50 (image id 2)"});
}
