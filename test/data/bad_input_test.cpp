// Bad input: every case throws one hetrain::Error whose message names the file and the problem, and no
// output file (final or temporary) is left behind.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <functional>

#include "data/h5util.hpp"
#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
// Runs f, expects a hetrain::Error whose message contains every needle, on one line.
void expect_error(const std::function<void()>& f, std::vector<std::string> needles) {
  try {
    f();
  } catch (const hetrain::Error& e) {
    for (const auto& n : needles) EXPECT_NE(e.message().find(n), std::string::npos) << e.message() << " lacks " << n;
    EXPECT_EQ(e.message().find('\n'), std::string::npos) << e.message();
    return;
  }
  ADD_FAILURE() << "no error thrown";
}

std::string packed_synthetic(const TempDir& dir, const std::string& name, int shards = 1) {
  auto src = open_synthetic(1, 20, 1, 3, 3, 4);
  PackOptions o;
  o.output = dir / name;
  o.shards = shards;
  o.progress = false;
  pack(*src, o);
  return o.output;
}

// Edits a packed file in place with the HDF5 API.
void edit(const std::string& path, const std::function<void(hid_t)>& f) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  h5::Id file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(file.valid());
  f(file);
}
}  // namespace

TEST(BadInput, MissingFile) { expect_error([] { Dataset::open("/nonexistent/x.h5"); }, {"/nonexistent/x.h5", "no such file"}); }

TEST(BadInput, NotAnHdf5File) {
  TempDir dir;
  write_bytes(dir / "t.h5", std::vector<uint8_t>(5000, 'x'));
  expect_error([&] { Dataset::open(dir / "t.h5"); }, {"t.h5", "not an HDF5 file"});
}

TEST(BadInput, TruncatedFile) {
  TempDir dir;
  auto path = packed_synthetic(dir, "t.h5");
  auto bytes = read_bytes(path);
  bytes.resize(bytes.size() / 2);
  write_bytes(path, bytes);
  expect_error([&] { Dataset::open(path); }, {"t.h5", "truncated"});
}

TEST(BadInput, WrongFormatNameOrVersion) {
  TempDir dir;
  auto a = packed_synthetic(dir, "a.h5"), b = packed_synthetic(dir, "b.h5");
  edit(a, [](hid_t f) { h5::write_string_attr(f, "format", "other-format"); });
  edit(b, [](hid_t f) { h5::write_int_attr(f, "version", 7); });
  expect_error([&] { Dataset::open(a); }, {"a.h5", "format is 'other-format'"});
  expect_error([&] { Dataset::open(b); }, {"b.h5", "version 7 is not supported"});
}

TEST(BadInput, ImagesLabelsCountMismatch) {
  TempDir dir;
  auto path = packed_synthetic(dir, "m.h5");
  edit(path, [](hid_t f) {
    H5Ldelete(f, "labels", H5P_DEFAULT);
    hsize_t n = 19;
    h5::Id space(H5Screate_simple(1, &n, nullptr));
    h5::Id d(H5Dcreate2(f, "labels", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    std::vector<int32_t> zeros(19, 0);
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
  });
  expect_error([&] { Dataset::open(path); }, {"m.h5", "count mismatch", "20", "19"});
}

TEST(BadInput, LabelOutOfRange) {
  TempDir dir;
  auto path = packed_synthetic(dir, "l.h5");
  edit(path, [](hid_t f) {
    h5::Id d(H5Dopen2(f, "labels", H5P_DEFAULT));
    std::vector<int32_t> labels(20, 1);
    labels[13] = 4;  // 4 classes: [0, 4)
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data());
  });
  expect_error([&] { Dataset::open(path); }, {"l.h5", "label 4 of sample 13", "outside [0, 4)"});
}

TEST(BadInput, EmptyDataset) {
  TempDir dir;
  auto path = packed_synthetic(dir, "e.h5");
  edit(path, [](hid_t f) { h5::write_int_attr(f, "num_samples", 0, H5T_STD_I64LE); });
  expect_error([&] { Dataset::open(path); }, {"e.h5", "empty dataset"});
  expect_error([] { open_synthetic(1, 0, 1, 2, 2, 2); }, {"empty dataset"});
  write_idx(dir / "i0", {0, 2, 2}, {}, false);
  write_idx(dir / "l0", {0}, {}, false);
  expect_error([&] { open_idx(dir / "i0", dir / "l0", 0, {}); }, {"i0", "empty dataset"});
}

TEST(BadInput, ShardListedButMissing) {
  TempDir dir;
  auto index = packed_synthetic(dir, "s.h5", 3);
  std::filesystem::remove(shard_path(index, 1, 3));
  expect_error([&] { Dataset::open(index); }, {"s.h5", "shard 1 of 3", "missing", "s-00001-of-00003.h5"});
}

TEST(BadInput, CorruptOrTruncatedIdx) {
  TempDir dir;
  auto px = random_bytes(10 * 4 * 4, 1);
  write_idx(dir / "img", {10, 4, 4}, px, false);
  write_idx(dir / "lab", {10}, std::vector<uint8_t>(10, 1), false);
  // Truncated image data: 3 bytes short.
  auto bytes = read_bytes(dir / "img");
  bytes.resize(bytes.size() - 3);
  write_bytes(dir / "trunc", bytes);
  expect_error([&] { open_idx(dir / "trunc", dir / "lab", 0, {}); }, {"trunc", "truncated IDX data", "offset 173", "entry 9"});
  // Wrong magic.
  bytes = read_bytes(dir / "img");
  bytes[2] = 0x0D;
  write_bytes(dir / "magic", bytes);
  expect_error([&] { open_idx(dir / "magic", dir / "lab", 0, {}); }, {"magic", "offset 2"});
  // Truncated gzip stream.
  write_idx(dir / "img.gz", {10, 4, 4}, px, true);
  auto gz = read_bytes(dir / "img.gz");
  gz.resize(gz.size() / 2);
  write_bytes(dir / "cut.gz", gz);
  expect_error([&] { open_idx(dir / "cut.gz", dir / "lab", 0, {}); }, {"cut.gz"});
  // Count mismatch and label out of range (--classes 3 with a label 5 at entry 4).
  write_idx(dir / "lab9", {9}, std::vector<uint8_t>(9, 1), false);
  expect_error([&] { open_idx(dir / "img", dir / "lab9", 0, {}); }, {"10 images", "9 labels"});
  std::vector<uint8_t> labels(10, 1);
  labels[4] = 5;
  write_idx(dir / "lab5", {10}, labels, false);
  expect_error([&] { open_idx(dir / "img", dir / "lab5", 3, {}); }, {"lab5", "entry 4", "offset 12", "label 5"});
}

TEST(BadInput, TruncatedOrBadCifar) {
  TempDir dir;
  auto rec = random_bytes(3 * 3073, 2);
  rec[0] = 1;
  rec[3073] = 2;
  rec[2 * 3073] = 3;
  write_bytes(dir / "ok.bin", rec);
  auto cut = rec;
  cut.resize(3073 * 2 + 100);
  write_bytes(dir / "cut.bin", cut);
  expect_error([&] { open_cifar({dir / "ok.bin", dir / "cut.bin"}, 10, true, {}); },
               {"cut.bin", "truncated", "record 2", "offset 6146"});
  rec[3073] = 12;
  write_bytes(dir / "lab.bin", rec);
  expect_error([&] { open_cifar({dir / "lab.bin"}, 10, true, {}); }, {"lab.bin", "record 1", "offset 3073", "label 12"});
}

TEST(BadInput, CorruptOrTruncatedImagesInFolder) {
  TempDir dir;
  std::filesystem::create_directories(dir / "r/a");
  auto img = smooth_image(16, 16, 3, 1);
  write_jpeg(dir / "r/a/good.jpg", 16, 16, 3, img, 90);
  auto jpg = read_bytes(dir / "r/a/good.jpg");
  std::vector<uint8_t> half(jpg.begin(), jpg.begin() + jpg.size() / 2);
  write_bytes(dir / "r/a/half.jpg", half);
  auto src = open_folder(dir / "r", 16, 3);
  std::vector<uint8_t> out(3 * 16 * 16);
  int32_t label;
  src->get(0, out.data(), &label);  // good.jpg sorts first
  expect_error([&] { src->get(1, out.data(), &label); }, {"half.jpg", "JPEG"});
  write_bytes(dir / "r/a/garbage.png", random_bytes(300, 3));
  expect_error([&] { open_folder(dir / "r", 16, 3)->get(0, out.data(), &label); }, {"garbage.png", "PNG"});
  // A pack that hits the bad file leaves no output and no temp file.
  std::filesystem::remove(dir / "r/a/garbage.png");
  PackOptions o;
  o.output = dir / "out.h5";
  o.progress = false;
  expect_error([&] { pack(*open_folder(dir / "r", 16, 3), o); }, {"half.jpg"});
  for (const auto& f : dir.files()) ADD_FAILURE() << "left behind: " << f;
}

TEST(BadInput, WriterRejectsOutOfRangeLabelAndRemovesTemp) {
  TempDir dir;
  DatasetMeta meta;
  meta.channels = 1;
  meta.height = meta.width = 2;
  meta.num_classes = 2;
  {
    FileWriter w(dir / "w.h5", 2, meta, {});
    uint8_t px[8] = {0};
    int32_t labels[2] = {0, 2};
    expect_error([&] { w.append(px, labels, 2); }, {"w.h5", "label 2 outside [0, 2)"});
    EXPECT_EQ(dir.files().size(), 1u);  // the temp file, while the writer lives
  }
  EXPECT_TRUE(dir.files().empty());
}
