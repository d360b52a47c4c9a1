// JPEG storage and the ImageNet recipe's transforms (docs/dataset-format.md "JPEG storage",
// docs/augmentation.md): RandomResizedCrop's windows against torchvision's rules and keyed by (seed, index)
// only; the evaluation window; resampling; decoding with DCT scaling against a full decode; a folder packed
// as JPEG read back byte for byte and decoded as its statistics say; the prefetcher's decoded batches alike
// in any thread count.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "data/image.hpp"
#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
// A folder of `per_class` smooth RGB JPEG files in each of 2 classes, sized h × w.
std::string jpeg_folder(const TempDir& dir, int per_class, int h, int w) {
  const std::string root = dir / "img";
  for (int k = 0; k < 2; ++k) {
    const std::string folder = root + "/c" + std::to_string(k);
    std::filesystem::create_directories(folder);
    for (int i = 0; i < per_class; ++i)
      write_jpeg(folder + "/" + std::to_string(i) + ".jpg", h, w, 3, smooth_image(h, w, 3, 10 * k + i), 92);
  }
  return root;
}

std::string pack_jpeg(const TempDir& dir, const std::string& root, int size, FolderStorage storage) {
  storage.jpeg = true;
  auto src = open_folder(root, size, 3, storage);
  PackOptions opt;
  opt.output = dir / "jpeg.h5";
  opt.progress = false;
  pack(*src, opt);
  return opt.output;
}
}  // namespace

TEST(ResizedCrop, WindowsFollowTorchvisionsRules) {
  int flips = 0, fallbacks = 0;
  for (int64_t index = 0; index < 2000; ++index) {
    const CropWindow w = draw_resized_crop(7, index, 300, 400);
    ASSERT_GE(w.x0, 0);
    ASSERT_GE(w.y0, 0);
    ASSERT_LE(w.x0 + w.width, 400);
    ASSERT_LE(w.y0 + w.height, 300);
    ASSERT_EQ(w.x0, std::floor(w.x0));  // whole pixels, as torchvision crops
    const double area = w.width * w.height / (300.0 * 400.0), ratio = w.width / w.height;
    if (w.width == 400 && w.height == 300) ++fallbacks;
    // Rounding the sides to whole pixels moves area and ratio a little past their ranges.
    EXPECT_GE(area, 0.08 * 0.97) << index;
    EXPECT_LE(area, 1.0);
    EXPECT_GE(ratio, 0.75 * 0.97) << index;
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.03) << index;
    flips += w.flip;
  }
  EXPECT_NEAR(flips / 2000.0, 0.5, 0.05);
  EXPECT_LT(fallbacks, 20);  // the tries almost always fit a 4:3 image
}

TEST(ResizedCrop, KeyedBySeedAndIndexOnly) {
  const CropWindow a = draw_resized_crop(3, 41, 256, 341), b = draw_resized_crop(3, 41, 256, 341);
  EXPECT_EQ(a.x0, b.x0);
  EXPECT_EQ(a.y0, b.y0);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.flip, b.flip);
  int same = 0;
  for (int64_t i = 0; i < 50; ++i) {
    const CropWindow c = draw_resized_crop(3, i, 256, 341), d = draw_resized_crop(4, i, 256, 341);
    same += c.x0 == d.x0 && c.y0 == d.y0 && c.width == d.width && c.height == d.height;
  }
  EXPECT_LT(same, 3) << "another seed (epoch) must draw other windows";
}

TEST(ResizedCrop, VeryElongatedImagesFallBackToTheCentre) {
  const CropWindow w = draw_resized_crop(1, 0, 10, 400);  // ratio 40: no try fits
  EXPECT_EQ(w.height, 10);
  EXPECT_EQ(w.width, std::lround(10 * 4.0 / 3.0));
  EXPECT_EQ(w.x0, (400 - 13) / 2);  // whole pixels, rounded down as torchvision does
}

TEST(CentreWindow, ResizesTheShorterSideTo256Over224ThenCropsTheCentre) {
  // Stored at the shorter side 256: the window is the centre 224 x 224 in whole pixels, no resampling.
  CropWindow w = centre_window(256, 341, 224, 224);
  EXPECT_DOUBLE_EQ(w.width, 224);
  EXPECT_DOUBLE_EQ(w.height, 224);
  EXPECT_DOUBLE_EQ(w.y0, 16);
  EXPECT_DOUBLE_EQ(w.x0, std::round((341 - 224) / 2.0));
  // A 500 x 375 image: scale 256/375, the window 224 x 224 of the resized image in source pixels.
  w = centre_window(375, 500, 224, 224);
  const double s = 256.0 / 375;
  EXPECT_NEAR(w.width, 224 / s, 1e-9);
  EXPECT_NEAR(w.y0, std::round((375 * s - 224) / 2) / s, 1e-9);
  EXPECT_NEAR(w.x0, std::round((500 * s - 224) / 2) / s, 1e-9);
}

TEST(ResampleWindow, WholePixelWindowAtScaleOneIsACopyAndFlipMirrors) {
  const int H = 9, W = 11, C = 3;
  const std::vector<uint8_t> chw = random_bytes(size_t(C) * H * W, 5);
  CropWindow win;
  win.x0 = 2;
  win.y0 = 1;
  win.width = 6;
  win.height = 5;
  std::vector<uint8_t> out(size_t(C) * 5 * 6), flipped(out.size());
  resample_window(chw.data(), PixelLayout::chw(H, W, C), win, 5, 6, out.data());
  win.flip = true;
  resample_window(chw.data(), PixelLayout::chw(H, W, C), win, 5, 6, flipped.data());
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < 5; ++y)
      for (int x = 0; x < 6; ++x) {
        ASSERT_EQ(out[(c * 5 + y) * 6 + x], chw[(c * H + y + 1) * W + x + 2]);
        ASSERT_EQ(flipped[(c * 5 + y) * 6 + x], out[(c * 5 + y) * 6 + 5 - x]);
      }
}

TEST(JpegDecode, DctScalingAgreesWithAFullDecode) {
  const int H = 480, W = 640;
  const std::vector<uint8_t> jpeg = encode_jpeg(Image{H, W, 3, smooth_image(H, W, 3, 3)}, 95);
  int sw = 0, sh = 0;
  jpeg_scaled_size(W, H, W, H, 200, 200, &sw, &sh);
  EXPECT_LT(sw, W) << "a 640 x 480 window resized to 200 x 200 decodes at a reduced scale";
  EXPECT_GE(sh, 200);
  // Through decode_sample (scaled) and through a full decode resampled the same way.
  std::vector<uint8_t> scaled(3 * 200 * 200), full(3 * 200 * 200);
  decode_sample(jpeg.data(), jpeg.size(), 3, 200, 200, false, 0, 0, "test", scaled.data());
  const Image img = decode_jpeg_bytes(jpeg.data(), jpeg.size(), 3, "test");
  resample_window(img.pixels.data(), PixelLayout::hwc(H, W, 3), centre_window(H, W, 200, 200), 200, 200, full.data());
  double diff = 0;
  for (size_t i = 0; i < full.size(); ++i) diff += std::abs(int(scaled[i]) - int(full[i]));
  EXPECT_LT(diff / double(full.size()), 2.0) << "mean absolute difference per pixel value";
}

TEST(JpegStorage, PackedFolderReadsBackAsStoredAndDecodesAsItsStatisticsSay) {
  TempDir dir;
  const std::string root = jpeg_folder(dir, 6, 120, 160);
  // Stored size 100: the 120 x 160 files are re-encoded at 100 x 133; one more folder keeps small files whole.
  const std::string path = pack_jpeg(dir, root, 64, {true, 100, 85});
  auto ds = Dataset::open(path);
  const DatasetInfo& info = ds->info();
  ASSERT_TRUE(info.jpeg);
  EXPECT_EQ(info.height, 64);
  EXPECT_EQ(info.num_samples, 12);
  std::vector<int64_t> all(12);
  std::iota(all.begin(), all.end(), 0);
  EncodedImages enc;
  std::vector<int32_t> labels(12);
  ds->read_encoded(all, enc, labels.data());
  for (int64_t i = 0; i < 12; ++i) {
    const JpegHeader hdr = read_jpeg_header(enc.bytes.data() + enc.offsets[i], size_t(enc.offsets[i + 1] - enc.offsets[i]), "sample");
    EXPECT_EQ(hdr.height, 100);
    EXPECT_EQ(hdr.width, 133);
    EXPECT_EQ(labels[size_t(i)], i / 6);
  }
  // read() decodes with the evaluation transform, as decode_batch does, and the mean matches the file's.
  std::vector<uint8_t> a(size_t(12 * info.sample_bytes())), b(a.size());
  ds->read(all, a.data(), nullptr);
  decode_batch(enc, all, info, false, 0, b.data(), 3);
  EXPECT_EQ(a, b);
  for (int c = 0; c < 3; ++c) {
    double s = 0;
    for (int64_t i = 0; i < 12; ++i)
      for (int64_t k = 0; k < 64 * 64; ++k) s += a[size_t((i * 3 + c) * 64 * 64 + k)];
    EXPECT_NEAR(s / (12.0 * 64 * 64 * 255), info.mean[size_t(c)], 1e-4);
  }
  // Requests in any order, duplicated, read the same bytes.
  EncodedImages again;
  ds->read_encoded({5, 5, 0, 11}, again, nullptr);
  for (int k = 0; k < 4; ++k) {
    const int64_t i = std::vector<int64_t>{5, 5, 0, 11}[size_t(k)];
    EXPECT_TRUE(std::equal(again.bytes.begin() + again.offsets[k], again.bytes.begin() + again.offsets[k + 1],
                           enc.bytes.begin() + enc.offsets[i], enc.bytes.begin() + enc.offsets[i + 1]));
  }
}

TEST(JpegStorage, SmallJpegFilesAreKeptByteForByte) {
  TempDir dir;
  const std::string root = jpeg_folder(dir, 2, 40, 50);
  const std::string kept = pack_jpeg(dir, root, 32, {true, 64, 90});  // shorter side 40 ≤ 64: kept
  auto ds = Dataset::open(kept);
  EncodedImages enc;
  ds->read_encoded({0}, enc, nullptr);
  EXPECT_EQ(enc.bytes, read_bytes(root + "/c0/0.jpg"));
  // At the default stored size (32 · 256/224 = 37 < 40) the same file is re-encoded smaller.
  TempDir other;
  auto reduced = Dataset::open(pack_jpeg(other, root, 32, {}));
  reduced->read_encoded({0}, enc, nullptr);
  EXPECT_EQ(read_jpeg_header(enc.bytes.data(), enc.bytes.size(), "sample 0").height, 37);
}

TEST(JpegStorage, CorruptBytesNameTheFileAndSample) {
  TempDir dir;
  const std::string path = pack_jpeg(dir, jpeg_folder(dir, 2, 48, 48), 32, {});
  auto ds = Dataset::open(path);
  EncodedImages enc;
  ds->read_encoded({0, 3}, enc, nullptr);
  std::fill(enc.bytes.begin() + enc.offsets[1] + 2, enc.bytes.end(), uint8_t(0x5A));  // sample 3's body
  std::vector<uint8_t> out(size_t(2 * ds->info().sample_bytes()));
  expect_error([&] { decode_batch(enc, {0, 3}, ds->info(), false, 0, out.data(), 2); },
               {path, "sample 3", "corrupt"});
}

TEST(JpegStorage, PrefetcherDecodesAlikeInAnyThreadCountAndBatch) {
  TempDir dir;
  const std::string path = pack_jpeg(dir, jpeg_folder(dir, 8, 90, 120), 48, {});
  auto ds = Dataset::open(path);
  AugmentConfig rrc;
  rrc.resized_crop = true;
  const std::vector<int64_t> batch = {3, 14, 7, 0, 9};
  std::vector<std::vector<uint8_t>> got;
  for (int threads : {1, 3}) {
    Prefetcher p(*ds, 2, 1, threads);
    p.submit(batch, true, rrc, 11, BatchForm::Raw);
    p.submit({7}, true, rrc, 11, BatchForm::Raw);  // sample 7 alone: the same pixels as in the batch
    p.submit(batch, false, rrc, 11, BatchForm::Raw);
    Batch b = p.next(), alone = p.next(), eval = p.next();
    const size_t sb = size_t(ds->info().sample_bytes());
    EXPECT_TRUE(std::equal(alone.raw.begin(), alone.raw.end(), b.raw.begin() + 2 * sb));
    EXPECT_NE(b.raw, eval.raw) << "augment = false decodes with the evaluation transform";
    for (int32_t v : b.crop_flip) EXPECT_EQ(v, 0);  // the flip is in the pixels already
    got.push_back(b.raw);
  }
  EXPECT_EQ(got[0], got[1]);
}

TEST(JpegStorage, NodeCacheIsRefusedWithAReason) {
  TempDir dir;
  const std::string path = pack_jpeg(dir, jpeg_folder(dir, 2, 40, 40), 32, {});
  auto ds = Dataset::open(path);
  expect_error([&] { ds->enable_node_cache(MPI_COMM_SELF); }, {path, "--cache", "JPEG"});
}

TEST(ResizedCrop, RawSamplesAreCroppedInPlaceKeyedByIndex) {
  DatasetInfo info;
  info.channels = 1;
  info.height = 16;
  info.width = 16;
  info.num_samples = 10;
  std::vector<uint8_t> a = random_bytes(3 * 256, 9), b(a.begin() + 256, a.begin() + 512);
  resized_crop_batch(a.data(), {4, 6, 2}, info, 5, 2);
  resized_crop_batch(b.data(), {6}, info, 5, 1);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin() + 256));
}

TEST(JpegStorage, AReusedBufferGetsTheSamplesOwnBytes) {
  // The packer hands each source the same per-slot buffers block after block.
  TempDir dir;
  FolderStorage storage;
  storage.jpeg = true;
  auto src = open_folder(jpeg_folder(dir, 2, 48, 48), 32, 3, storage);  // 48 > 37: re-encoded
  std::vector<uint8_t> reused, fresh, image(3 * 32 * 32);
  int32_t label = 0;
  src->get_encoded(0, reused, image.data(), &label);
  src->get_encoded(3, reused, image.data(), &label);
  src->get_encoded(3, fresh, image.data(), &label);
  EXPECT_EQ(reused, fresh);
  EXPECT_EQ(label, 1);
}

TEST(JpegDecode, CmykFilesDecodeToRgbAndGrey) {
  // Four-channel JPEG files (ImageNet has a few) hold inverted inks: a stored value v passes v/255 of the light.
  const int H = 32, W = 48;
  const std::vector<uint8_t> rgb = smooth_image(H, W, 3, 5);
  std::vector<uint8_t> cmyk(size_t(H) * W * 4);
  for (size_t p = 0; p < size_t(H) * W; ++p) {
    for (int c = 0; c < 3; ++c) cmyk[4 * p + c] = rgb[3 * p + c];
    cmyk[4 * p + 3] = p < size_t(H) * W / 2 ? 255 : 128;  // no black in the top half, half black below
  }
  tjhandle h = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(h, cmyk.data(), W, 0, H, TJPF_CMYK, &buf, &size, TJSAMP_444, 98, TJFLAG_ACCURATEDCT), 0);
  const std::vector<uint8_t> jpeg(buf, buf + size);
  tjFree(buf);
  tjDestroy(h);
  ASSERT_EQ(read_jpeg_header(jpeg.data(), jpeg.size(), "cmyk").colorspace, TJCS_YCCK);
  const Image colour = decode_jpeg_bytes(jpeg.data(), jpeg.size(), 3, "cmyk");
  const Image grey = decode_jpeg_bytes(jpeg.data(), jpeg.size(), 1, "cmyk");
  double top = 0, bottom = 0, luma = 0;
  const size_t half = size_t(H) * W / 2;
  for (size_t p = 0; p < size_t(H) * W; ++p) {
    double y = 0;
    for (int c = 0; c < 3; ++c) {
      const double want = p < half ? rgb[3 * p + c] : rgb[3 * p + c] * 128.0 / 255;
      (p < half ? top : bottom) += std::abs(colour.pixels[3 * p + c] - want);
      y += (c == 0 ? 0.299 : c == 1 ? 0.587 : 0.114) * colour.pixels[3 * p + c];
    }
    luma += std::abs(grey.pixels[p] - y);
  }
  EXPECT_LT(top / (3.0 * half), 3.0) << "mean absolute error without black ink";
  EXPECT_LT(bottom / (3.0 * half), 3.0) << "mean absolute error at half black";
  EXPECT_LT(luma / (H * W), 1.0) << "grey is the colour decode's luma";
}
