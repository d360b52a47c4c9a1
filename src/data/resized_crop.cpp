// RandomResizedCrop and the evaluation transform of torchvision's ImageNet recipe (docs/augmentation.md): a
// window of the stored image, resampled bilinearly to the batch's H × W. A window is drawn from
// Rng(aug_seed ^ kResizedCropStream, dataset index) only, so a sample is augmented alike on any rank and in
// any split.
#include <algorithm>
#include <cmath>
#include <vector>

#include "data/rng.hpp"
#include "data/sample_threads.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
constexpr uint64_t kResizedCropStream = 0x7272632d63726f70ull;  // keeps these draws apart from crop_flip's
constexpr double kMinArea = 0.08, kMaxArea = 1.0, kMinRatio = 3.0 / 4.0, kMaxRatio = 4.0 / 3.0;
constexpr int kTries = 10;

// Source coordinate and weights of each output column or row: out index o samples the window at
// origin + (o + 0.5)·scale − 0.5, clamped to the image.
struct Taps {
  std::vector<int> lo, hi;
  std::vector<float> w;  // weight of hi
};
Taps taps(double origin, double extent, int out, int limit) {
  Taps t;
  t.lo.resize(size_t(out));
  t.hi.resize(size_t(out));
  t.w.resize(size_t(out));
  const double scale = extent / out;
  for (int o = 0; o < out; ++o) {
    const double f = std::clamp(origin + (o + 0.5) * scale - 0.5, 0.0, double(limit - 1));
    const int lo = int(f);
    t.lo[size_t(o)] = lo;
    t.hi[size_t(o)] = std::min(lo + 1, limit - 1);
    t.w[size_t(o)] = float(f - lo);
  }
  return t;
}
}  // namespace

CropWindow draw_resized_crop(uint64_t aug_seed, int64_t index, int H, int W) {
  HT_CHECK(H > 0 && W > 0, "draw_resized_crop: empty image");
  Rng rng(aug_seed ^ kResizedCropStream, uint64_t(index));
  CropWindow win;
  win.flip = rng.uniform() < 0.5;  // drawn first: the tries below take a varying number of draws
  const double area = double(H) * W;
  for (int t = 0; t < kTries; ++t) {
    const double target = area * (kMinArea + (kMaxArea - kMinArea) * rng.uniform());
    const double log_ratio = std::log(kMinRatio) + (std::log(kMaxRatio) - std::log(kMinRatio)) * rng.uniform();
    const double ratio = std::exp(log_ratio);
    const int w = int(std::lround(std::sqrt(target * ratio))), h = int(std::lround(std::sqrt(target / ratio)));
    if (w > 0 && w <= W && h > 0 && h <= H) {
      win.y0 = double(rng.below(uint64_t(H - h + 1)));
      win.x0 = double(rng.below(uint64_t(W - w + 1)));
      win.width = w;
      win.height = h;
      return win;
    }
  }
  // No try fitted (a very elongated image): the whole image, cut to the nearest allowed ratio, centred.
  const double in_ratio = double(W) / H;
  int w = W, h = H;
  if (in_ratio < kMinRatio) h = std::min(H, int(std::lround(W / kMinRatio)));
  else if (in_ratio > kMaxRatio) w = std::min(W, int(std::lround(H * kMaxRatio)));
  win.x0 = (W - w) / 2;
  win.y0 = (H - h) / 2;
  win.width = w;
  win.height = h;
  return win;
}

CropWindow centre_window(int H, int W, int out_h, int out_w) {
  HT_CHECK(H > 0 && W > 0 && out_h > 0 && out_w > 0, "centre_window: empty image or output");
  const double resized_short = std::round(std::min(out_h, out_w) * 256.0 / 224.0);
  const double s = resized_short / std::min(H, W);  // the resize factor of the whole image
  // The crop's corner is rounded in the resized image, as torchvision's CenterCrop rounds it.
  const double top = std::round((H * s - out_h) / 2), left = std::round((W * s - out_w) / 2);
  CropWindow win;
  win.y0 = top / s;
  win.x0 = left / s;
  win.height = out_h / s;
  win.width = out_w / s;
  return win;
}

void resample_window(const uint8_t* image, const PixelLayout& in, const CropWindow& win, int out_h, int out_w,
                     uint8_t* out) {
  const Taps ty = taps(win.y0, win.height, out_h, in.height), tx = taps(win.x0, win.width, out_w, in.width);
  const int64_t out_plane = int64_t(out_h) * out_w;
  for (int c = 0; c < in.channels; ++c) {
    const uint8_t* src = image + c * in.plane;
    uint8_t* dst = out + c * out_plane;
    for (int y = 0; y < out_h; ++y) {
      const uint8_t* r0 = src + ty.lo[size_t(y)] * in.row;
      const uint8_t* r1 = src + ty.hi[size_t(y)] * in.row;
      const float wy = ty.w[size_t(y)];
      uint8_t* d = dst + int64_t(y) * out_w;
      for (int x = 0; x < out_w; ++x) {
        const int xs = win.flip ? out_w - 1 - x : x;
        const int64_t a = tx.lo[size_t(xs)] * in.step, b = tx.hi[size_t(xs)] * in.step;
        const float wx = tx.w[size_t(xs)];
        const float top = r0[a] + wx * (float(r0[b]) - r0[a]), bottom = r1[a] + wx * (float(r1[b]) - r1[a]);
        d[x] = uint8_t(std::clamp(top + wy * (bottom - top), 0.0f, 255.0f) + 0.5f);
      }
    }
  }
}

void resized_crop_batch(uint8_t* images, const std::vector<int64_t>& indices, const DatasetInfo& info,
                        uint64_t aug_seed, int threads) {
  const int C = info.channels, H = info.height, W = info.width;
  const int64_t sb = info.sample_bytes();
  const PixelLayout layout = PixelLayout::chw(H, W, C);
  for_each_sample(int64_t(indices.size()), threads, [&](int64_t i) {
    thread_local std::vector<uint8_t> copy;
    copy.assign(images + i * sb, images + (i + 1) * sb);
    resample_window(copy.data(), layout, draw_resized_crop(aug_seed, indices[size_t(i)], H, W), H, W,
                    images + i * sb);
  });
}

}  // namespace hetrain::data
