// test/gpu/normalize_crop_flip_test.cpp — uint8 → float with crop and flip: the twin on a tiny image by
// hand (runs everywhere), then the kernel against the twin. Tolerance atol 1e-6 + rtol 1e-6: both compute
// (v/255 − mean)/std with IEEE division, so they should agree to the last bit or nearly.
#include <gtest/gtest.h>

#include <random>

#include "gpu_test_util.hpp"
#include "ops/normalize_crop_flip/normalize_crop_flip.hpp"
#include "twins.hpp"

using namespace hetrain;
using gpu_test::expect_close;

// One 1×2×3 image [[10,20,30],[40,50,60]], padding 1, 2×2 crops.
TEST(NormalizeTwin, TinyImageByHand) {
  const uint8_t img[6] = {10, 20, 30, 40, 50, 60};
  ImageGeom g;
  g.N = 1, g.C = 1, g.H = 2, g.W = 3, g.out_h = 2, g.out_w = 2, g.pad = 1;
  float out[4];
  // Top-left of the padded image: three padding pixels and the first pixel.
  const int32_t top_left[3] = {0, 0, 0};
  ops::normalize_crop_flip_cpu(out, img, top_left, g);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 0.0f);
  EXPECT_FLOAT_EQ(out[2], 0.0f);
  EXPECT_FLOAT_EQ(out[3], 10.0f / 255.0f);
  // Rows 1-2, columns 2-3 of the padded image = columns 1-2 of the image, then mirrored.
  const int32_t flipped[3] = {1, 2, 1};
  ops::normalize_crop_flip_cpu(out, img, flipped, g);
  EXPECT_FLOAT_EQ(out[0], 30.0f / 255.0f);
  EXPECT_FLOAT_EQ(out[1], 20.0f / 255.0f);
  EXPECT_FLOAT_EQ(out[2], 60.0f / 255.0f);
  EXPECT_FLOAT_EQ(out[3], 50.0f / 255.0f);
  // Normalisation applies to padding too: (0 − 0.5)/0.25 = −2.
  g.mean[0] = 0.5f, g.std[0] = 0.25f;
  ops::normalize_crop_flip_cpu(out, img, top_left, g);
  EXPECT_FLOAT_EQ(out[0], -2.0f);
  EXPECT_FLOAT_EQ(out[3], (10.0f / 255.0f - 0.5f) / 0.25f);
  // No crop: identity geometry.
  g.pad = 0, g.out_h = 2, g.out_w = 3;
  float full[6];
  ops::normalize_crop_flip_cpu(full, img, nullptr, g);
  EXPECT_FLOAT_EQ(full[5], (60.0f / 255.0f - 0.5f) / 0.25f);
}

TEST(CudaNormalizeCropFlip, ParityRandomCropsAndFlips) {
  HT_REQUIRE_GPU();
  struct Case {
    int N, C, H, W, out_h, out_w, pad;
  };
  const Case cases[] = {{7, 3, 32, 32, 32, 32, 4}, {5, 1, 28, 28, 24, 24, 0}, {3, 3, 17, 23, 15, 21, 2},
                        {2, 4, 9, 5, 13, 9, 2}, {4, 3, 8, 8, 8, 8, 0}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    SCOPED_TRACE("N=" + std::to_string(c.N) + " C=" + std::to_string(c.C) + " " + std::to_string(c.H) + "x" +
                 std::to_string(c.W));
    ImageGeom g;
    g.N = c.N, g.C = c.C, g.H = c.H, g.W = c.W, g.out_h = c.out_h, g.out_w = c.out_w, g.pad = c.pad;
    for (int k = 0; k < c.C; ++k) g.mean[k] = 0.4f + 0.05f * k, g.std[k] = 0.2f + 0.03f * k;
    std::vector<uint8_t> img(size_t(c.N) * c.C * c.H * c.W);
    for (auto& v : img) v = uint8_t(rng() & 255);
    std::vector<int32_t> cf(3 * c.N);
    for (int n = 0; n < c.N; ++n) {
      cf[3 * n] = int32_t(rng() % (c.H + 2 * c.pad - c.out_h + 1));
      cf[3 * n + 1] = int32_t(rng() % (c.W + 2 * c.pad - c.out_w + 1));
      cf[3 * n + 2] = int32_t(n % 2);
    }
    const size_t out_n = size_t(c.N) * c.C * c.out_h * c.out_w;
    std::vector<float> ref(out_n);
    ops::normalize_crop_flip_cpu(ref.data(), img.data(), cf.data(), g);
    cuda::DeviceBuffer<uint8_t> din(img.size());
    cuda::DeviceBuffer<int32_t> dcf(cf.size());
    cuda::DeviceBuffer<float> dout(out_n);
    din.upload(img);
    dcf.upload(cf);
    cuda::normalize_crop_flip(dout.data(), din.data(), dcf.data(), g, nullptr);
    expect_close("crop/flip", dout.download(), ref, 1e-6, 1e-6);
    if (c.out_h == c.H && c.out_w == c.W && c.pad == 0) {
      ops::normalize_crop_flip_cpu(ref.data(), img.data(), nullptr, g);
      cuda::normalize_crop_flip(dout.data(), din.data(), nullptr, g, nullptr);
      expect_close("plain", dout.download(), ref, 1e-6, 1e-6);
    }
  }
}

TEST(CudaNormalizeCropFlip, RejectsBadGeometry) {
  HT_REQUIRE_GPU();
  ImageGeom g;
  g.N = 1, g.C = 5;  // more channels than the kernel carries
  EXPECT_THROW(cuda::normalize_crop_flip(nullptr, nullptr, nullptr, g, nullptr), Error);
  g.C = 3, g.out_h = 40, g.pad = 2;  // crop larger than the padded image
  EXPECT_THROW(cuda::normalize_crop_flip(nullptr, nullptr, nullptr, g, nullptr), Error);
}
