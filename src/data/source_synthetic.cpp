// Synthetic images: class k has a smooth colour pattern (two random plane waves per channel, drawn from
// the seed); a sample is its class pattern plus uniform noise of ±32. A small CNN separates the classes
// easily, yet no two samples are equal. Everything derives from (seed, index): any rank can generate any
// sample.
#include <algorithm>
#include <cmath>

#include "data/pack.hpp"
#include "data/rng.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"
#include "hetrain/resources.hpp"

namespace hetrain::data {
namespace {
constexpr double kMaxPatternBytes = double(256 << 20);

class SyntheticSource : public SampleSource {
 public:
  SyntheticSource(uint64_t seed, int64_t count, int C, int H, int W, int K) : seed_(seed), n_(count) {
    HT_CHECK(count > 0, "--count must be positive (empty dataset), got ", count);
    check_sample_shape("synthetic images", C, H, W);
    HT_CHECK(K > 0, "--classes must be positive, got ", K);
    // The class patterns are rendered up front, about a second per 16 MiB on one core: the cap keeps that
    // start-up short (a 1000-class 3x224x224 set fits) instead of silently computing for minutes.
    const double proto_bytes = double(K) * C * H * W;
    HT_CHECK(proto_bytes <= double(kMaxPatternBytes), "synthetic: ", K, " class patterns of ", C, "x", H, "x", W,
             " are ", bytes_text(proto_bytes), ", more than the generator renders (", bytes_text(kMaxPatternBytes),
             "): use fewer classes or channels, or smaller images");
    check_memory_for(proto_bytes, "synthetic: " + std::to_string(K) + " class patterns of " + std::to_string(C) +
                                      "x" + std::to_string(H) + "x" + std::to_string(W));
    meta.channels = C;
    meta.height = H;
    meta.width = W;
    meta.num_classes = K;
    meta.source = "synthetic: seed " + std::to_string(seed) + ", " + std::to_string(count) + " samples";
    proto_.resize(size_t(proto_bytes));
    const double kTwoPi = 6.283185307179586;
    for (int k = 0; k < K; ++k) {
      Rng rng(seed, 1000003ull * k + 17);
      for (int c = 0; c < C; ++c) {
        double base = 64 + 128 * rng.uniform();
        double f1 = 1 + 3 * rng.uniform(), a1 = kTwoPi * rng.uniform(), p1 = kTwoPi * rng.uniform();
        double f2 = 1 + 3 * rng.uniform(), a2 = kTwoPi * rng.uniform(), p2 = kTwoPi * rng.uniform();
        uint8_t* out = &proto_[(size_t(k) * C + c) * H * W];
        for (int y = 0; y < H; ++y)
          for (int x = 0; x < W; ++x) {
            double u = double(x) / W, v = double(y) / H;
            double val = base + 40 * std::sin(kTwoPi * f1 * (u * std::cos(a1) + v * std::sin(a1)) + p1) +
                         30 * std::sin(kTwoPi * f2 * (u * std::cos(a2) + v * std::sin(a2)) + p2);
            out[y * W + x] = uint8_t(std::clamp(std::lround(val), 0l, 255l));
          }
      }
    }
  }
  int64_t size() const override { return n_; }
  void get(int64_t i, uint8_t* image, int32_t* label) const override {
    Rng rng(seed_ ^ 0xA5A5A5A5ull, uint64_t(i));
    int k = int(rng.below(uint64_t(meta.num_classes)));
    *label = k;
    const size_t sb = size_t(meta.channels) * meta.height * meta.width;
    const uint8_t* p = &proto_[k * sb];
    for (size_t j = 0; j < sb; j += 8) {
      uint64_t r = rng.next();
      for (size_t b = 0; b < 8 && j + b < sb; ++b) {
        int noise = int((r >> (8 * b)) & 63) - 32;
        image[j + b] = uint8_t(std::clamp(int(p[j + b]) + noise, 0, 255));
      }
    }
  }

 private:
  uint64_t seed_;
  int64_t n_;
  std::vector<uint8_t> proto_;  // [K, C, H, W]
};
}  // namespace

std::unique_ptr<SampleSource> open_synthetic(uint64_t seed, int64_t count, int channels, int height, int width,
                                             int num_classes) {
  return std::make_unique<SyntheticSource>(seed, count, channels, height, width, num_classes);
}

}  // namespace hetrain::data
