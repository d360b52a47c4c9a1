// Augmentation on the CPU: random crop from the image zero-padded by p on each side (the torchvision
// RandomCrop(padding=p) recipe), horizontal flip with probability 1/2, then normalisation.
// A sample draws its offsets and flip from Rng(aug_seed, its dataset index) only, so the result depends on
// neither the thread count, nor its position in the batch, nor the rank that reads it: with the trainer's
// seed a function of (--seed, epoch), a sample is cropped and flipped alike under every split. draw_one()
// is the only place that draws: the CPU path here and the GPU path (draw_crop_flip →
// cuda::normalize_crop_flip) apply the same crops and flips, and move_boxes() moves a detection sample's
// boxes by them (docs/detection.md, "Augmentation").
#include <algorithm>
#include <thread>
#include <vector>

#include "data/rng.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
struct CropFlip {
  int y0 = 0, x0 = 0;  // crop corner in the image zero-padded by crop_pad() on each side
  bool flip = false;
};

CropFlip draw_one(bool augment, const AugmentConfig& aug, int pad, uint64_t aug_seed, int64_t index) {
  Rng rng(aug_seed, uint64_t(index));
  CropFlip d;
  if (augment && aug.random_crop) {  // y0 − pad, x0 − pad uniform in [−pad, pad]
    d.y0 = int(rng.below(2 * pad + 1));
    d.x0 = int(rng.below(2 * pad + 1));
  }
  if (augment && aug.hflip) d.flip = rng.below(2) == 1;
  return d;
}

void augment_one(const uint8_t* in, const DatasetInfo& info, CropFlip d, int pad, float* out) {
  const int C = info.channels, H = info.height, W = info.width;
  // Source offset of the crop window relative to the unpadded image.
  const int dy = d.y0 - pad, dx = d.x0 - pad;
  const bool flip = d.flip;
  for (int c = 0; c < C; ++c) {
    const float scale = 1.0f / (255.0f * info.std[c]), shift = -info.mean[c] / info.std[c];
    const float pad_value = shift;  // a zero pixel, normalised
    const uint8_t* src = in + size_t(c) * H * W;
    float* dst = out + size_t(c) * H * W;
    for (int y = 0; y < H; ++y) {
      int sy = y + dy;
      float* row = dst + size_t(y) * W;
      if (sy < 0 || sy >= H) {
        std::fill(row, row + W, pad_value);
        continue;
      }
      const uint8_t* srow = src + size_t(sy) * W;
      // Output x reads source column sx = x + dx (or W−1−x + dx flipped); [x0, x1) is where sx is inside
      // the image. Branch-free loops over that range let the compiler vectorise the conversion.
      const int x0 = std::min(W, flip ? std::max(0, dx) : std::max(0, -dx));
      const int x1 = flip ? std::min(W, W + dx) : std::min(W, W - dx);
      std::fill(row, row + x0, pad_value);
      if (x1 > x0) {
        if (flip) {
          const uint8_t* s = srow + (W - 1 + dx);  // source of x is s[-x]
          for (int x = x0; x < x1; ++x) row[x] = float(s[-x]) * scale + shift;
        } else {
          const uint8_t* s = srow + dx;  // source of x is s[x]
          for (int x = x0; x < x1; ++x) row[x] = float(s[x]) * scale + shift;
        }
      }
      std::fill(row + std::max(x1, x0), row + W, pad_value);
    }
  }
}
}  // namespace

int crop_pad(bool augment, const AugmentConfig& aug) {
  HT_CHECK(aug.crop_padding >= 0, "crop padding must be non-negative, got ", aug.crop_padding);
  return augment && aug.random_crop ? aug.crop_padding : 0;
}

namespace {
std::vector<int64_t> positions(int64_t n) {
  std::vector<int64_t> p(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  return p;
}
}  // namespace

std::vector<int32_t> draw_crop_flip_positions(int64_t n, bool augment, const AugmentConfig& aug, uint64_t aug_seed) {
  return draw_crop_flip(positions(n), augment, aug, aug_seed);
}

std::vector<int32_t> draw_crop_flip(const std::vector<int64_t>& indices, bool augment, const AugmentConfig& aug,
                                    uint64_t aug_seed) {
  const int pad = crop_pad(augment, aug);
  const int64_t n = int64_t(indices.size());
  std::vector<int32_t> out(size_t(n) * 3);
  for (int64_t i = 0; i < n; ++i) {
    const CropFlip d = draw_one(augment, aug, pad, aug_seed, indices[size_t(i)]);
    out[3 * i] = d.y0;
    out[3 * i + 1] = d.x0;
    out[3 * i + 2] = d.flip ? 1 : 0;
  }
  return out;
}

namespace {
// One box under a crop offset (dy, dx) and flip, in pixels: augment_one's output pixel x shows source column
// x + dx (then mirrored), so a source edge at x lands at x − dx, clipped to [0, W], and W − x when flipped.
// Returns false when the box is to be dropped.
bool move_box(float* b, int dy, int dx, bool flip, int H, int W) {
  if (dx == 0 && dy == 0) {  // nothing clipped: only the flip, exactly cx → 1 − cx
    if (flip) b[1] = 1.0f - b[1];
    return true;
  }
  const double w = double(b[3]) * W, h = double(b[4]) * H;
  const double ox0 = double(b[1]) * W - w / 2 - dx, oy0 = double(b[2]) * H - h / 2 - dy;
  double x0 = std::clamp(ox0, 0.0, double(W)), x1 = std::clamp(ox0 + w, 0.0, double(W));
  const double y0 = std::clamp(oy0, 0.0, double(H)), y1 = std::clamp(oy0 + h, 0.0, double(H));
  if (x1 <= x0 || y1 <= y0 || (x1 - x0) * (y1 - y0) < 0.1 * w * h) return false;
  if (flip) {
    const double f0 = W - x1, f1 = W - x0;
    x0 = f0;
    x1 = f1;
  }
  b[1] = float((x0 + x1) / 2 / W);
  b[2] = float((y0 + y1) / 2 / H);
  b[3] = float((x1 - x0) / W);
  b[4] = float((y1 - y0) / H);
  return true;
}
}  // namespace

void move_boxes(BoxList& boxes, const std::vector<int32_t>& crop_flip, int pad, int height, int width) {
  const int64_t n = boxes.samples();
  HT_CHECK(int64_t(crop_flip.size()) == 3 * n, "move_boxes: ", crop_flip.size() / 3, " crops for ", n, " samples");
  // Rows are compacted in place: a dropped box's row is overwritten by the next kept one.
  int64_t out = 0, begin = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int dy = crop_flip[3 * i] - pad, dx = crop_flip[3 * i + 1] - pad;
    const bool flip = crop_flip[3 * i + 2] != 0;
    const int64_t end = boxes.offsets[i + 1];
    for (int64_t r = begin; r < end; ++r) {
      float* b = boxes.rows.data() + r * kBoxFields;
      if (!move_box(b, dy, dx, flip, height, width)) continue;
      if (out != r) std::copy(b, b + kBoxFields, boxes.rows.data() + out * kBoxFields);
      ++out;
    }
    begin = end;
    boxes.offsets[i + 1] = out;
  }
  boxes.rows.resize(size_t(out) * kBoxFields);
}

void augment_batch(const uint8_t* images, int64_t n, const DatasetInfo& info, bool augment,
                   const AugmentConfig& aug, uint64_t aug_seed, float* out, int threads) {
  augment_batch(images, positions(n), info, augment, aug, aug_seed, out, threads);
}

void augment_batch(const uint8_t* images, const std::vector<int64_t>& indices, const DatasetInfo& info,
                   bool augment, const AugmentConfig& aug, uint64_t aug_seed, float* out, int threads) {
  const int64_t n = int64_t(indices.size());
  HT_CHECK(int(info.mean.size()) == info.channels && int(info.std.size()) == info.channels,
           "dataset mean/std do not match its ", info.channels, " channels");
  const int pad = crop_pad(augment, aug);
  const int64_t sb = info.sample_bytes();
  auto work = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      augment_one(images + i * sb, info, draw_one(augment, aug, pad, aug_seed, indices[size_t(i)]), pad,
                  out + i * sb);
  };
  int t = int(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  if (t == 1) return work(0, n);
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k) pool.emplace_back(work, n * k / t, n * (k + 1) / t);
  work(0, n / t);
  for (auto& th : pool) th.join();
}

}  // namespace hetrain::data
