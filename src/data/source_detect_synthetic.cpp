// Generated detection scenes (docs/detection.md, "Generated data"): small grey items (Fashion-MNIST) pasted
// at 1-3x scale onto a noisy canvas of random size, then letterboxed to one fixed size, since the dataset
// format stores fixed-size images. Every draw comes from Rng(scene seed, sample index), so any rank can
// generate any sample and the same seed always gives the same bytes.
#include <algorithm>
#include <cmath>

#include "data/image.hpp"
#include "data/pack.hpp"
#include "data/rng.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
constexpr int kCanvasMin = 128, kCanvasMax = 320;  // canvas sides, pixels
constexpr double kScaleMin = 1, kScaleMax = 3;     // item scale
constexpr int kPlacementTries = 20;                // before an item that finds no free place is left out
constexpr uint8_t kLetterboxFill = 114;            // the grey YOLO-style letterboxes pad with

struct PixelBox {  // pixel-edge coordinates on the canvas: [x0, x1) × [y0, y1)
  int x0, y0, x1, y1;
  bool overlaps(const PixelBox& o, int margin) const {
    return x0 < o.x1 + margin && o.x0 < x1 + margin && y0 < o.y1 + margin && o.y0 < y1 + margin;
  }
};

// Tight bounds of the nonzero pixels of a one-channel image; x1 = 0 when it has none.
PixelBox nonzero_bounds(const Image& item) {
  PixelBox b{item.width, item.height, 0, 0};
  for (int y = 0; y < item.height; ++y)
    for (int x = 0; x < item.width; ++x)
      if (item.pixels[size_t(y) * item.width + x]) {
        b.x0 = std::min(b.x0, x);
        b.y0 = std::min(b.y0, y);
        b.x1 = std::max(b.x1, x + 1);
        b.y1 = std::max(b.y1, y + 1);
      }
  return b;
}

class DetectSyntheticSource : public SampleSource {
 public:
  DetectSyntheticSource(std::shared_ptr<const SampleSource> items, const DetectSyntheticOptions& opt)
      : items_(std::move(items)), opt_(opt) {
    HT_CHECK(opt.count > 0, "--count must be positive (empty dataset), got ", opt.count);
    HT_CHECK(opt.max_items >= 1, "--max-items must be at least 1, got ", opt.max_items);
    HT_CHECK(opt.size >= 16, "--size must be at least 16, got ", opt.size);
    HT_CHECK(opt.channels == 1 || opt.channels == 3, "--channels must be 1 or 3, got ", opt.channels);
    check_sample_shape("--size " + std::to_string(opt.size), opt.channels, opt.size, opt.size);
    const DatasetMeta& im = items_->meta;
    HT_CHECK(im.channels == 1, "detect-synthetic: the items must be grey (1 channel), got ", im.channels);
    HT_CHECK(im.height * kScaleMax <= kCanvasMin && im.width * kScaleMax <= kCanvasMin,
             "detect-synthetic: items of ", im.height, "x", im.width, " do not fit a ", kCanvasMin,
             " px canvas at 3x scale");
    meta.channels = opt.channels;
    meta.height = meta.width = opt.size;
    meta.num_classes = im.num_classes;
    meta.class_names = im.class_names;
    meta.has_boxes = true;
    meta.source = "detect-synthetic: seed " + std::to_string(opt.seed) + ", split tag " +
                  std::to_string(opt.split_tag) + ", " + std::to_string(opt.count) + " scenes of 1-" +
                  std::to_string(opt.max_items) + " items at 1-3x on 128-320 px canvases, letterboxed to " +
                  std::to_string(opt.size) + "; items from " + im.source;
    scene_seed_ = splitmix64(opt.seed) ^ splitmix64(0x5EED0000ull + opt.split_tag);
  }
  int64_t size() const override { return opt_.count; }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    std::vector<float> boxes;
    get_boxed(i, image, label, boxes);
  }
  void get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const override;

 private:
  Image noisy_canvas(Rng& rng) const;
  std::shared_ptr<const SampleSource> items_;
  DetectSyntheticOptions opt_;
  uint64_t scene_seed_ = 0;
};

// A canvas of random size filled with uniform noise of a random amplitude (16..64), per channel.
Image DetectSyntheticSource::noisy_canvas(Rng& rng) const {
  Image c;
  c.height = kCanvasMin + int(rng.below(kCanvasMax - kCanvasMin + 1));
  c.width = kCanvasMin + int(rng.below(kCanvasMax - kCanvasMin + 1));
  c.channels = opt_.channels;
  c.pixels.resize(size_t(c.height) * c.width * c.channels);
  const uint32_t amplitude = 16 + uint32_t(rng.below(49));
  for (size_t j = 0; j < c.pixels.size(); j += 8) {
    const uint64_t r = rng.next();
    for (size_t b = 0; b < 8 && j + b < c.pixels.size(); ++b)
      c.pixels[j + b] = uint8_t((((r >> (8 * b)) & 0xFF) * (amplitude + 1)) >> 8);
  }
  return c;
}

void DetectSyntheticSource::get_boxed(int64_t i, uint8_t* image, int32_t* label, std::vector<float>& boxes) const {
  Rng rng(scene_seed_, uint64_t(i));
  Image canvas = noisy_canvas(rng);
  const int C = canvas.channels, n_items = 1 + int(rng.below(uint64_t(opt_.max_items)));
  const DatasetMeta& im = items_->meta;
  Image item;
  item.height = im.height;
  item.width = im.width;
  item.channels = 1;
  item.pixels.resize(size_t(im.height) * im.width);
  std::vector<PixelBox> placed;
  std::vector<int32_t> classes;
  for (int k = 0; k < n_items; ++k) {
    int32_t cls = 0;
    items_->get(int64_t(rng.below(uint64_t(items_->size()))), item.pixels.data(), &cls);
    const double scale = kScaleMin + (kScaleMax - kScaleMin) * rng.uniform();
    const Image scaled = resize_bilinear(item, int(std::lround(im.height * scale)), int(std::lround(im.width * scale)));
    float tint[3] = {1, 1, 1};
    if (C == 3)
      for (float& t : tint) t = float(0.4 + 0.6 * rng.uniform());
    const PixelBox tight = nonzero_bounds(scaled);
    if (tight.x1 == 0) continue;  // an all-black item: nothing to find
    // A free place: the item's tight box may not touch an earlier one (1 px apart), so every box bounds
    // exactly the visible pixels of its item.
    for (int t = 0; t < kPlacementTries; ++t) {
      const int ox = int(rng.below(uint64_t(canvas.width - scaled.width + 1)));
      const int oy = int(rng.below(uint64_t(canvas.height - scaled.height + 1)));
      const PixelBox box{ox + tight.x0, oy + tight.y0, ox + tight.x1, oy + tight.y1};
      if (std::any_of(placed.begin(), placed.end(), [&](const PixelBox& p) { return p.overlaps(box, 1); })) continue;
      for (int y = 0; y < scaled.height; ++y)
        for (int x = 0; x < scaled.width; ++x) {
          const uint8_t v = scaled.pixels[size_t(y) * scaled.width + x];
          if (!v) continue;
          uint8_t* px = &canvas.pixels[(size_t(oy + y) * canvas.width + ox + x) * C];
          for (int c = 0; c < C; ++c) px[c] = uint8_t(std::max(1l, std::lround(v * tint[c])));
        }
      placed.push_back(box);
      classes.push_back(cls);
      break;
    }
  }
  const Placement p = letterbox(canvas, opt_.size, kLetterboxFill, image);
  boxes.clear();
  const double s = opt_.size;
  for (size_t k = 0; k < placed.size(); ++k) {
    const double x0 = placed[k].x0 * p.scale_x + p.pad_x, x1 = placed[k].x1 * p.scale_x + p.pad_x;
    const double y0 = placed[k].y0 * p.scale_y + p.pad_y, y1 = placed[k].y1 * p.scale_y + p.pad_y;
    boxes.insert(boxes.end(), {float(classes[k]), float((x0 + x1) / 2 / s), float((y0 + y1) / 2 / s),
                               float((x1 - x0) / s), float((y1 - y0) / s)});
  }
  *label = label_of_boxes(boxes);
}
}  // namespace

std::unique_ptr<SampleSource> open_detect_synthetic(std::shared_ptr<const SampleSource> items,
                                                    const DetectSyntheticOptions& opt) {
  HT_CHECK(items && items->size() > 0, "detect-synthetic: no items to paste");
  return std::make_unique<DetectSyntheticSource>(std::move(items), opt);
}

}  // namespace hetrain::data
