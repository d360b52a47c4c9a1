// pack → Dataset::read returns exactly the source bytes, for every converter.
#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "data/image.hpp"
#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
std::vector<int64_t> iota_n(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

PackOptions quiet_to(const std::string& out) {
  PackOptions o;
  o.output = out;
  o.progress = false;
  return o;
}

void check_idx_roundtrip(bool gzip, int shards) {
  TempDir dir;
  const int n = 37, h = 5, w = 7;
  auto pixels = random_bytes(size_t(n) * h * w, 11);
  std::vector<uint8_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = uint8_t((i * 7) % 10);
  write_idx(dir / "img", {uint32_t(n), uint32_t(h), uint32_t(w)}, pixels, gzip);
  write_idx(dir / "lab", {uint32_t(n)}, labels, gzip);
  auto src = open_idx(dir / "img", dir / "lab", 0, {});
  PackOptions o = quiet_to(dir / "out.h5");
  o.shards = shards;
  o.write.gzip_level = gzip ? 4 : 0;
  pack(*src, o);
  auto ds = Dataset::open(dir / "out.h5");
  ASSERT_EQ(ds->info().num_samples, n);
  ASSERT_EQ(ds->info().channels, 1);
  ASSERT_EQ(ds->info().height, h);
  ASSERT_EQ(ds->info().width, w);
  ASSERT_EQ(ds->info().num_classes, 10);
  std::vector<uint8_t> got(pixels.size());
  std::vector<int32_t> got_labels(n);
  ds->read(iota_n(n), got.data(), got_labels.data());
  EXPECT_EQ(got, pixels);
  for (int i = 0; i < n; ++i) EXPECT_EQ(got_labels[i], labels[i]) << "sample " << i;
  EXPECT_EQ(int(ds->info().shard_files.size()), shards);
  double m = 0, m2 = 0;
  for (uint8_t p : pixels) { m += p / 255.0; m2 += (p / 255.0) * (p / 255.0); }
  m /= pixels.size();
  EXPECT_NEAR(ds->info().mean[0], m, 1e-5);
  EXPECT_NEAR(ds->info().std[0], std::sqrt(m2 / pixels.size() - m * m), 1e-5);
  // No temp files left behind, and the shard files plus index are all that exists.
  for (const auto& f : dir.files()) EXPECT_EQ(f.find(".tmp-"), std::string::npos) << f;
}
}  // namespace

TEST(RoundTrip, IdxPlain) { check_idx_roundtrip(false, 1); }
TEST(RoundTrip, IdxGzipCompressedShards) { check_idx_roundtrip(true, 3); }

TEST(RoundTrip, Cifar10And100) {
  TempDir dir;
  for (int variant : {10, 100}) {
    const int lb = variant == 10 ? 1 : 2, rec = lb + 3072;
    std::vector<uint8_t> b1, b2;
    std::vector<uint8_t> expect_pixels;
    std::vector<int> expect_labels;
    for (int i = 0; i < 9; ++i) {
      auto& b = i < 5 ? b1 : b2;
      auto px = random_bytes(3072, 100 + i);
      int coarse = i % 20, fine = (i * 13) % 100, l10 = i % 10;
      if (variant == 10) b.push_back(uint8_t(l10));
      else { b.push_back(uint8_t(coarse)); b.push_back(uint8_t(fine)); }
      b.insert(b.end(), px.begin(), px.end());
      expect_pixels.insert(expect_pixels.end(), px.begin(), px.end());
      expect_labels.push_back(variant == 10 ? l10 : fine);
    }
    ASSERT_EQ(b1.size(), size_t(5 * rec));
    write_bytes(dir / "b1.bin", b1);
    write_bytes(dir / "b2.bin", b2);
    auto src = open_cifar({dir / "b1.bin", dir / "b2.bin"}, variant, true, {});
    std::string out = dir / ("c" + std::to_string(variant) + ".h5");
    pack(*src, quiet_to(out));
    auto ds = Dataset::open(out);
    EXPECT_EQ(ds->info().num_classes, variant);
    EXPECT_EQ(ds->info().channels, 3);
    std::vector<uint8_t> got(expect_pixels.size());
    std::vector<int32_t> labels(9);
    ds->read(iota_n(9), got.data(), labels.data());
    EXPECT_EQ(got, expect_pixels) << "CIFAR-" << variant;
    for (int i = 0; i < 9; ++i) EXPECT_EQ(labels[i], expect_labels[i]);
  }
}

TEST(RoundTrip, FolderPngExactJpegMatchesDecoder) {
  TempDir dir;
  const int S = 12;
  std::filesystem::create_directories(dir / "root/cat");
  std::filesystem::create_directories(dir / "root/dog");
  // class "cat" (0): two PNGs, exact size; class "dog" (1): one JPEG exact size, one larger non-square PNG.
  auto a = smooth_image(S, S, 3, 1), b = smooth_image(S, S, 3, 2), c = smooth_image(S, S, 3, 3);
  auto d = smooth_image(20, 30, 3, 4);
  write_png(dir / "root/cat/a.png", S, S, 3, a);
  write_png(dir / "root/cat/b.PNG", S, S, 3, b);
  write_jpeg(dir / "root/dog/c.jpg", S, S, 3, c, 95);
  write_png(dir / "root/dog/d.png", 20, 30, 3, d);
  std::filesystem::create_directories(dir / "root/dog/notes");  // ignored: not an image file
  auto src = open_folder(dir / "root", S, 3);
  ASSERT_EQ(src->size(), 4);
  pack(*src, quiet_to(dir / "f.h5"));
  auto ds = Dataset::open(dir / "f.h5");
  EXPECT_EQ(ds->info().class_names, (std::vector<std::string>{"cat", "dog"}));
  const int sb = 3 * S * S;
  std::vector<uint8_t> got(4 * sb);
  std::vector<int32_t> labels(4);
  ds->read(iota_n(4), got.data(), labels.data());
  EXPECT_EQ(labels, (std::vector<int32_t>{0, 0, 1, 1}));
  auto chw = [&](const std::vector<uint8_t>& hwc, int c, int y, int x) { return hwc[(y * S + x) * 3 + c]; };
  int jpeg_max_diff = 0;
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < S; ++y)
      for (int x = 0; x < S; ++x) {
        size_t k = (size_t(ch) * S + y) * S + x;
        ASSERT_EQ(got[k], chw(a, ch, y, x));
        ASSERT_EQ(got[sb + k], chw(b, ch, y, x));
        jpeg_max_diff = std::max(jpeg_max_diff, std::abs(int(got[2 * sb + k]) - int(chw(c, ch, y, x))));
      }
  EXPECT_LE(jpeg_max_diff, 24) << "JPEG quality 95 of a smooth image";
  // And exactly what libturbojpeg itself decodes.
  auto bytes = read_bytes(dir / "root/dog/c.jpg");
  tjhandle t = tjInitDecompress();
  std::vector<uint8_t> dec(sb);
  ASSERT_EQ(tjDecompress2(t, bytes.data(), bytes.size(), dec.data(), S, 0, S, TJPF_RGB, TJFLAG_ACCURATEDCT), 0);
  tjDestroy(t);
  for (int ch = 0; ch < 3; ++ch)
    for (int y = 0; y < S; ++y)
      for (int x = 0; x < S; ++x) ASSERT_EQ(got[2 * sb + (size_t(ch) * S + y) * S + x], chw(dec, ch, y, x));
  // The 20×30 PNG: resized to 12×18, centre 12×12 crop — equals resize_center_crop of the decoded image.
  std::vector<uint8_t> expect(sb);
  resize_center_crop(decode_png(dir / "root/dog/d.png", 3), S, expect.data());
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), got.begin() + 3 * sb));
}

TEST(RoundTrip, SyntheticIsSeededAndPacksItsBytes) {
  TempDir dir;
  auto src = open_synthetic(7, 50, 3, 8, 6, 5);
  auto again = open_synthetic(7, 50, 3, 8, 6, 5);
  auto other = open_synthetic(8, 50, 3, 8, 6, 5);
  const int sb = 3 * 8 * 6;
  std::vector<uint8_t> expect(50 * sb), b(sb), c(sb);
  std::vector<int32_t> labels(50);
  bool differs = false;
  for (int i = 0; i < 50; ++i) {
    int32_t l2, l3;
    src->get(i, expect.data() + i * sb, &labels[i]);
    again->get(i, b.data(), &l2);
    other->get(i, c.data(), &l3);
    ASSERT_TRUE(std::equal(b.begin(), b.end(), expect.begin() + i * sb));
    ASSERT_EQ(l2, labels[i]);
    differs |= !std::equal(c.begin(), c.end(), expect.begin() + i * sb);
  }
  EXPECT_TRUE(differs);
  PackOptions o = quiet_to(dir / "s.h5");
  o.shard_size = 16;  // 4 shards: 12/13/12/13
  pack(*src, o);
  auto ds = Dataset::open(dir / "s.h5");
  EXPECT_EQ(ds->info().shard_files.size(), 4u);
  std::vector<uint8_t> got(expect.size());
  std::vector<int32_t> got_labels(50);
  ds->read(iota_n(50), got.data(), got_labels.data());
  EXPECT_EQ(got, expect);
  EXPECT_EQ(got_labels, labels);
}

TEST(RoundTrip, ValidationSplitPartitionsTheSource) {
  TempDir dir;
  auto src = open_synthetic(3, 100, 1, 4, 4, 3);
  PackOptions o = quiet_to(dir / "train.h5");
  o.val_fraction = 0.2;
  o.val_output = dir / "val.h5";
  PackResult r = pack(*src, o);
  EXPECT_EQ(r.train_count, 80);
  EXPECT_EQ(r.val_count, 20);
  // Every source sample appears in exactly one of the two files (samples are distinct: noise).
  auto tr = Dataset::open(dir / "train.h5"), va = Dataset::open(dir / "val.h5");
  std::vector<std::vector<uint8_t>> seen;
  for (auto* ds : {tr.get(), va.get()}) {
    int64_t n = ds->info().num_samples;
    std::vector<uint8_t> buf(n * 16);
    ds->read(iota_n(n), buf.data(), nullptr);
    for (int64_t i = 0; i < n; ++i) seen.emplace_back(buf.begin() + i * 16, buf.begin() + (i + 1) * 16);
  }
  std::vector<std::vector<uint8_t>> all;
  for (int i = 0; i < 100; ++i) {
    std::vector<uint8_t> s(16);
    int32_t l;
    src->get(i, s.data(), &l);
    all.push_back(s);
  }
  std::sort(seen.begin(), seen.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(seen, all);
  // Mean/std stored are those of the file's own samples.
  EXPECT_NEAR(tr->info().mean[0], 0.5, 0.3);
}
