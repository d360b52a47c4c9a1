// Augmentation on the CPU: random crop from the image zero-padded by p on each side (the torchvision
// RandomCrop(padding=p) recipe), horizontal flip with probability 1/2, then normalisation.
// Sample i of a batch draws its offsets and flip from Rng(aug_seed, i) only, so results do not depend on
// the thread count or on which thread handled the sample.
#include <algorithm>
#include <thread>
#include <vector>

#include "data/rng.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
void augment_one(const uint8_t* in, const DatasetInfo& info, bool augment, const AugmentConfig& aug, Rng rng,
                 float* out) {
  const int C = info.channels, H = info.height, W = info.width;
  int dy = 0, dx = 0;  // source offset of the crop window relative to the unpadded image
  bool flip = false;
  if (augment && aug.random_crop) {
    int p = aug.crop_padding;
    dy = int(rng.below(2 * p + 1)) - p;
    dx = int(rng.below(2 * p + 1)) - p;
  }
  if (augment && aug.hflip) flip = rng.below(2) == 1;
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

void augment_batch(const uint8_t* images, int64_t n, const DatasetInfo& info, bool augment,
                   const AugmentConfig& aug, uint64_t aug_seed, float* out, int threads) {
  HT_CHECK(aug.crop_padding >= 0, "crop padding must be non-negative, got ", aug.crop_padding);
  HT_CHECK(int(info.mean.size()) == info.channels && int(info.std.size()) == info.channels,
           "dataset mean/std do not match its ", info.channels, " channels");
  const int64_t sb = info.sample_bytes();
  auto work = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      augment_one(images + i * sb, info, augment, aug, Rng(aug_seed, uint64_t(i)), out + i * sb);
  };
  int t = int(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  if (t == 1) return work(0, n);
  std::vector<std::thread> pool;
  for (int k = 1; k < t; ++k) pool.emplace_back(work, n * k / t, n * (k + 1) / t);
  work(0, n / t);
  for (auto& th : pool) th.join();
}

}  // namespace hetrain::data
