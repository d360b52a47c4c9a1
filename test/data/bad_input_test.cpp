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

// The validation cases of docs/dataset-format.md that need an edited file: each is refused by
// Dataset::open with one line naming the file and the problem. A pristine copy opens (the edits are what
// is refused).
namespace {
// Replaces dataset `name` by one of the given type and dims (zeros).
void recreate(hid_t f, const char* name, hid_t type, const std::vector<hsize_t>& dims) {
  H5Ldelete(f, name, H5P_DEFAULT);
  h5::Id space(H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  h5::Id d(H5Dcreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  size_t n = H5Tget_size(type);
  for (hsize_t v : dims) n *= v;
  std::vector<uint8_t> zeros(n, 0);
  H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data());
}
}  // namespace

TEST(BadInput, PristineFileOpens) {
  TempDir dir;
  auto ds = Dataset::open(packed_synthetic(dir, "ok.h5"));
  EXPECT_EQ(ds->info().num_samples, 20);
}

TEST(BadInput, MissingOrInconsistentAttributes) {
  TempDir dir;
  struct Case {
    const char* file;
    std::function<void(hid_t)> edit;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"noclasses.h5", [](hid_t f) { H5Adelete(f, "num_classes"); }, {"missing attribute 'num_classes'"}},
      {"noshape.h5", [](hid_t f) { H5Adelete(f, "shape"); }, {"missing attribute 'shape'"}},
      {"shape2.h5", [](hid_t f) { h5::write_int_array_attr(f, "shape", {1, 3}); },
       {"attribute 'shape' must be three positive integers"}},
      {"shape0.h5", [](hid_t f) { h5::write_int_array_attr(f, "shape", {1, 0, 3}); },
       {"attribute 'shape' must be three positive integers"}},
      {"mean2.h5", [](hid_t f) { h5::write_float_array_attr(f, "mean", {0.5f, 0.5f}); },
       {"mean/std must have one value per channel (1)"}},
      {"std0.h5", [](hid_t f) { h5::write_float_array_attr(f, "std", {0.0f}); }, {"std 0 is not positive"}},
      {"names.h5", [](hid_t f) { h5::write_string_array_attr(f, "class_names", {"a", "b", "c"}); },
       {"3 class names for 4 classes"}},
      {"classes0.h5", [](hid_t f) { h5::write_int_attr(f, "num_classes", 0); }, {"num_classes is 0"}},
      {"strversion.h5", [](hid_t f) { h5::write_string_attr(f, "version", "1"); },
       {"attribute 'version' is not an integer"}},
      {"layout.h5", [](hid_t f) { h5::write_string_attr(f, "layout", "striped"); }, {"unknown layout 'striped'"}},
      {"noformat.h5", [](hid_t f) { H5Adelete(f, "format"); }, {"not a hetrain dataset", "'format' is missing"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    auto path = packed_synthetic(dir, c.file);
    edit(path, c.edit);
    std::vector<std::string> needles = {std::string(c.file) + ": "};
    needles.insert(needles.end(), c.needles.begin(), c.needles.end());
    expect_error([&] { Dataset::open(path); }, needles);
  }
}

TEST(BadInput, ImagesOfWrongTypeOrShape) {
  TempDir dir;
  auto i16 = packed_synthetic(dir, "int16.h5"), f32 = packed_synthetic(dir, "float.h5");
  auto rank3 = packed_synthetic(dir, "rank3.h5"), other = packed_synthetic(dir, "other.h5");
  auto count = packed_synthetic(dir, "count.h5"), noimg = packed_synthetic(dir, "noimages.h5");
  auto lfloat = packed_synthetic(dir, "lfloat.h5"), l2d = packed_synthetic(dir, "l2d.h5");
  edit(i16, [](hid_t f) { recreate(f, "images", H5T_STD_U16LE, {20, 1, 3, 3}); });
  edit(f32, [](hid_t f) { recreate(f, "images", H5T_IEEE_F32LE, {20, 1, 3, 3}); });
  edit(rank3, [](hid_t f) { recreate(f, "images", H5T_STD_U8LE, {20, 3, 3}); });
  edit(other, [](hid_t f) { recreate(f, "images", H5T_STD_U8LE, {20, 1, 4, 3}); });
  edit(count, [](hid_t f) { recreate(f, "images", H5T_STD_U8LE, {21, 1, 3, 3}); });
  edit(noimg, [](hid_t f) { H5Ldelete(f, "images", H5P_DEFAULT); });
  edit(lfloat, [](hid_t f) { recreate(f, "labels", H5T_IEEE_F32LE, {20}); });
  edit(l2d, [](hid_t f) { recreate(f, "labels", H5T_STD_I32LE, {20, 1}); });
  expect_error([&] { Dataset::open(i16); }, {"int16.h5", "/images must be uint8"});
  expect_error([&] { Dataset::open(f32); }, {"float.h5", "/images must be uint8"});
  expect_error([&] { Dataset::open(rank3); }, {"rank3.h5", "/images must have 4 dimensions [N, C, H, W]"});
  expect_error([&] { Dataset::open(other); }, {"other.h5", "/images samples are 1x4x3, expected 1x3x3"});
  expect_error([&] { Dataset::open(count); }, {"count.h5", "/images holds 21 samples but attribute 'num_samples' says 20"});
  expect_error([&] { Dataset::open(noimg); }, {"noimages.h5", "dataset /images is missing"});
  expect_error([&] { Dataset::open(lfloat); }, {"lfloat.h5", "/labels must be integers"});
  expect_error([&] { Dataset::open(l2d); }, {"l2d.h5", "/labels must have 1 dimension [N]"});
}

TEST(BadInput, ShardCountDiffersFromIndex) {
  TempDir dir;
  auto index = packed_synthetic(dir, "s.h5", 3);  // shards of 6, 7, 7 samples
  edit(index, [](hid_t f) {
    h5::Id d(H5Dopen2(f, "shards/counts", H5P_DEFAULT));
    const int64_t counts[3] = {7, 6, 7};  // same total, shards 0 and 1 wrong
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts);
  });
  // Refused at open, before any read touches the shard.
  expect_error([&] { Dataset::open(index); },
               {"s.h5", "the index says shard 0", "s-00000-of-00003.h5", "holds 7 samples, the shard says 6"});
  auto sum = packed_synthetic(dir, "t.h5", 3);
  edit(sum, [](hid_t f) { h5::write_int_attr(f, "num_samples", 21, H5T_STD_I64LE); });
  expect_error([&] { Dataset::open(sum); }, {"t.h5", "shard counts add up to 20 but num_samples is 21"});
}

TEST(BadInput, BadLabelInOneShardIsRefusedAtOpen) {
  TempDir dir;
  auto index = packed_synthetic(dir, "b.h5", 3);
  edit(shard_path(index, 2, 3), [](hid_t f) {
    h5::Id d(H5Dopen2(f, "labels", H5P_DEFAULT));
    std::vector<int32_t> labels(7, 1);
    labels[3] = -2;
    H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data());
  });
  expect_error([&] { Dataset::open(index); }, {"b-00002-of-00003.h5", "label -2 of sample 3", "outside [0, 4)"});
}

// A file claiming far more samples than it holds is refused before anything is allocated for the count.
TEST(BadInput, ClaimsOfHugeCountsAreRefusedBeforeAllocating) {
  TempDir dir;
  const int64_t huge = int64_t(1) << 36;
  auto attr = packed_synthetic(dir, "attr.h5");
  edit(attr, [&](hid_t f) { h5::write_int_attr(f, "num_samples", huge, H5T_STD_I64LE); });
  expect_error([&] { Dataset::open(attr); }, {"attr.h5", "/images holds 20 samples but attribute 'num_samples' says 68719476736"});
  // Extents of 2^36 with nothing stored (HDF5 allows unwritten chunks).
  auto sparse = packed_synthetic(dir, "sparse.h5");
  edit(sparse, [&](hid_t f) {
    h5::write_int_attr(f, "num_samples", huge, H5T_STD_I64LE);
    for (const char* name : {"images", "labels"}) {
      H5Ldelete(f, name, H5P_DEFAULT);
      const bool img = name[0] == 'i';
      const hsize_t dims[4] = {hsize_t(huge), 1, 3, 3}, chunk[4] = {1024, 1, 3, 3};
      h5::Id space(H5Screate_simple(img ? 4 : 1, dims, nullptr));
      h5::Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
      H5Pset_chunk(dcpl, img ? 4 : 1, chunk);
      h5::Id d(H5Dcreate2(f, name, img ? H5T_STD_U8LE : H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    }
  });
  expect_error([&] { Dataset::open(sparse); }, {"sparse.h5", "claims 68719476736 samples of 9 bytes, more than its"});
  auto index = packed_synthetic(dir, "i.h5", 2);
  edit(index, [&](hid_t f) {
    h5::Id d(H5Dopen2(f, "shards/counts", H5P_DEFAULT));
    const int64_t counts[2] = {huge, 10};
    H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, counts);
    h5::write_int_attr(f, "num_samples", huge + 10, H5T_STD_I64LE);
  });
  expect_error([&] { Dataset::open(index); }, {"i.h5", "the index says shard 0", "holds 68719476736 samples, the shard says 10"});
  // An absurd image shape in the attributes (60000^2 overflows 32-bit arithmetic).
  auto shape = packed_synthetic(dir, "shape.h5");
  edit(shape, [](hid_t f) { h5::write_int_array_attr(f, "shape", {1, 60000, 60000}); });
  expect_error([&] { Dataset::open(shape); }, {"shape.h5: attribute 'shape': a 1x60000x60000 sample is 3.6e+09 bytes"});
}

TEST(BadInput, AbsurdImageSizesAreRefusedByTheSources) {
  expect_error([] { open_synthetic(1, 10, 3, 60000, 60000, 2); }, {"synthetic images: a 3x60000x60000 sample"});
  expect_error([] { open_folder("/nonexistent", 60000, 3); }, {"--size 60000: a 3x60000x60000 sample is 1.08e+10 bytes"});
  expect_error([] { check_sample_shape("x", 1, int64_t(1) << 40, int64_t(1) << 40); }, {"x: a 1x1099511627776x1099511627776"});
  check_sample_shape("ok", 3, 224, 224);  // no throw
}
