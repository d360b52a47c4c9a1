// hetrain eval --save-json's mapping of a detection back to the original image (src/train/coco_results.cpp)
// by hand-computed letterbox placements, its agreement with the packer's letterbox(), and the JSON it writes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "data/image.hpp"
#include "hetrain/error.hpp"
#include "train/coco_results.hpp"

using namespace hetrain;

namespace {
void expect_box(const detect::Box& b, float x0, float y0, float x1, float y1) {
  EXPECT_FLOAT_EQ(b.x0, x0);
  EXPECT_FLOAT_EQ(b.y0, y0);
  EXPECT_FLOAT_EQ(b.x1, x1);
  EXPECT_FLOAT_EQ(b.y1, y1);
}
}  // namespace

// 64×32 on a 64 canvas: scale 1, 16 px of padding above; 40×40: scale 1.6, no padding.
TEST(CocoResults, UnletterboxUndoesThePlacement) {
  expect_box(train::unletterbox({10, 20, 30, 40}, 64, 32, 64), 10, 4, 30, 24);
  expect_box(train::unletterbox({16, 16, 48, 32}, 40, 40, 64), 10, 10, 30, 20);
  expect_box(train::unletterbox({-5, 0, 70, 10}, 64, 32, 64), 0, 0, 64, 0);  // clipped to the original image
}

// The placement the mapping uses is the one letterbox() applied to the pixels.
TEST(CocoResults, PlacementIsTheLetterboxOne) {
  for (auto [w, h] : {std::pair{30, 60}, std::pair{97, 41}, std::pair{64, 64}}) {
    data::Image img;
    img.width = w, img.height = h, img.channels = 1;
    img.pixels.assign(size_t(w) * h, 7);
    std::vector<uint8_t> out(64 * 64);
    const data::Placement p = data::letterbox(img, 64, 114, out.data()), q = data::letterbox_placement(w, h, 64);
    EXPECT_EQ(p.pad_x, q.pad_x);
    EXPECT_EQ(p.pad_y, q.pad_y);
    EXPECT_DOUBLE_EQ(p.scale_x, q.scale_x);
    EXPECT_DOUBLE_EQ(p.scale_y, q.scale_y);
  }
}

TEST(CocoResults, WritesCocoResultsWithTheDatasetsIds) {
  data::ImageOrigins o;
  o.present = true;
  o.image_ids = {21, 7};
  o.sizes = {64, 32, 40, 40};
  o.category_ids = {1, 5};
  train::CocoResults r(o, 64, 2);
  r.add_image(1, {{{16, 16, 48, 32}, 0.75f, 1}});
  r.add_image(0, {{{10, 20, 30, 40}, 0.5f, 0}, {{0, 16, 64, 48}, 0.25f, 1}});
  EXPECT_EQ(r.detections(), 3);
  EXPECT_THROW(r.add_image(2, {}), Error);
  const std::string path = "/tmp/hetrain-coco-results-" + std::to_string(::getpid()) + ".json";
  r.write(path);
  nlohmann::json j;
  std::ifstream(path) >> j;
  std::remove(path.c_str());
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["image_id"], 7);
  EXPECT_EQ(j[0]["category_id"], 5);
  EXPECT_EQ(j[0]["bbox"], nlohmann::json({10.0, 10.0, 20.0, 10.0}));
  EXPECT_DOUBLE_EQ(j[0]["score"].get<double>(), 0.75);
  EXPECT_EQ(j[1]["image_id"], 21);
  EXPECT_EQ(j[1]["category_id"], 1);
  EXPECT_EQ(j[2]["bbox"], nlohmann::json({0.0, 0.0, 64.0, 32.0}));
}
