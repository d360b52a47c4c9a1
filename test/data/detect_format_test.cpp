// Detection datasets in the HDF5 format (docs/dataset-format.md, "Detection datasets"): boxes survive
// pack → read in every layout and any request order, and bad boxes, bad offsets and the wrong kind of
// dataset are refused with one line naming the file and the entry.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <functional>
#include <numeric>

#include "data/h5util.hpp"
#include "data/pack.hpp"
#include "data_test_util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

using namespace hetrain::data;
using namespace hetrain::data::testing;

namespace {
PackOptions quiet_to(const std::string& out) {
  PackOptions o;
  o.output = out;
  o.progress = false;
  return o;
}

// The boxes of `indices` as the source holds them.
BoxList expected_boxes(const std::vector<std::vector<float>>& src, const std::vector<int64_t>& indices) {
  BoxList b;
  b.offsets.assign(1, 0);
  for (int64_t i : indices) {
    b.rows.insert(b.rows.end(), src[size_t(i)].begin(), src[size_t(i)].end());
    b.offsets.push_back(int64_t(b.rows.size()) / kBoxFields);
  }
  return b;
}

void edit(const std::string& path, const std::function<void(hid_t)>& f) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  h5::Id file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
  ASSERT_TRUE(file.valid());
  f(file);
}

// Overwrites box `row`'s field `k` of a packed single file.
void set_box_field(const std::string& path, int64_t row, int k, float value) {
  edit(path, [&](hid_t f) {
    h5::Id d(H5Dopen2(f, "boxes", H5P_DEFAULT));
    h5::Id fs(H5Dget_space(d));
    hsize_t start[2] = {hsize_t(row), hsize_t(k)}, count[2] = {1, 1};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    h5::Id ms(H5Screate_simple(2, count, nullptr));
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, &value), 0);
  });
}

void set_offsets(const std::string& path, const std::vector<int64_t>& offsets) {
  edit(path, [&](hid_t f) {
    h5::Id d(H5Dopen2(f, "box_offsets", H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, offsets.data()), 0);
  });
}

// 3 samples with boxes 1, 0, 2 (rows 0 | - | 1, 2), 3 classes.
std::string packed_three(const TempDir& dir, const std::string& name) {
  BoxSource src({{1, 0.5f, 0.5f, 0.2f, 0.2f}, {}, {0, 0.25f, 0.25f, 0.5f, 0.5f, 2, 0.9f, 0.9f, 0.2f, 0.2f}}, 1, 4, 4,
                3);
  pack(src, quiet_to(dir / name));
  return dir / name;
}
}  // namespace

TEST(DetectFormat, BoxesRoundTripInEveryLayoutAndOrder) {
  const int n = 41, K = 5;
  const auto boxes = varied_boxes(n, K, 3);
  for (int shards : {1, 3}) {
    TempDir dir;
    BoxSource src(boxes, 2, 5, 6, K);
    PackOptions o = quiet_to(dir / "d.h5");
    o.shards = shards;
    pack(src, o);
    auto ds = Dataset::open(dir / "d.h5");
    ASSERT_TRUE(ds->has_boxes());
    int64_t total = 0;
    for (const auto& b : boxes) total += int64_t(b.size()) / kBoxFields;
    EXPECT_EQ(ds->info().num_boxes, total);
    // Shuffled with duplicates, across shards.
    std::vector<int64_t> idx = {40, 3, 3, 0, 17, 22, 39, 1, 2, 14, 27, 28};
    std::vector<uint8_t> images(idx.size() * size_t(ds->info().sample_bytes()));
    std::vector<int32_t> labels(idx.size());
    BoxList got;
    ds->read(idx, images.data(), labels.data(), &got);
    const BoxList want = expected_boxes(boxes, idx);
    EXPECT_EQ(got.offsets, want.offsets) << shards << " shards";
    EXPECT_EQ(got.rows, want.rows) << shards << " shards";
    for (size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(labels[i], label_of_boxes(boxes[size_t(idx[i])]));
    std::vector<int64_t> all(n);
    std::iota(all.begin(), all.end(), 0);
    const BoxList every = ds->all_boxes();
    EXPECT_EQ(every.rows, expected_boxes(boxes, all).rows);
    EXPECT_EQ(every.offsets, expected_boxes(boxes, all).offsets);
  }
}

TEST(DetectFormat, ValidationSplitKeepsEachSampleWithItsBoxes) {
  TempDir dir;
  const auto boxes = varied_boxes(30, 4, 9);
  BoxSource src(boxes, 1, 3, 3, 4);
  PackOptions o = quiet_to(dir / "t.h5");
  o.val_fraction = 0.3;
  o.val_output = dir / "v.h5";
  PackResult r = pack(src, o);
  auto t = Dataset::open(dir / "t.h5"), v = Dataset::open(dir / "v.h5");
  EXPECT_EQ(r.train_boxes + r.val_boxes, t->info().num_boxes + v->info().num_boxes);
  int64_t total = 0;
  for (const auto& b : boxes) total += int64_t(b.size()) / kBoxFields;
  EXPECT_EQ(t->info().num_boxes + v->info().num_boxes, total);
  // Every packed image is one source sample (by its bytes), and carries that sample's boxes.
  for (auto* ds : {t.get(), v.get()}) {
    const int64_t m = ds->info().num_samples;
    std::vector<int64_t> idx(m);
    std::iota(idx.begin(), idx.end(), 0);
    std::vector<uint8_t> images(size_t(m) * 9);
    BoxList got;
    ds->read(idx, images.data(), nullptr, &got);
    for (int64_t i = 0; i < m; ++i) {
      int64_t source = -1;
      for (int64_t s = 0; s < 30 && source < 0; ++s) {
        std::vector<uint8_t> px(9);
        int32_t l;
        src.get(s, px.data(), &l);
        if (std::equal(px.begin(), px.end(), images.begin() + i * 9)) source = s;
      }
      ASSERT_GE(source, 0);
      std::vector<float> rows(got.box(got.offsets[i]), got.box(got.offsets[i + 1]));
      EXPECT_EQ(rows, boxes[size_t(source)]) << "sample " << i;
    }
  }
}

TEST(DetectFormat, ClassificationFilesAreUnchangedAndHaveNoBoxes) {
  TempDir dir;
  PackOptions o = quiet_to(dir / "c.h5");
  pack(*open_synthetic(1, 10, 1, 2, 2, 3), o);
  auto ds = Dataset::open(dir / "c.h5");
  EXPECT_FALSE(ds->has_boxes());
  EXPECT_EQ(ds->info().num_boxes, 0);
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    h5::Id f(H5Fopen((dir / "c.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    EXPECT_FALSE(h5::has_attr(f, "task"));
    EXPECT_LE(H5Lexists(f, "boxes", H5P_DEFAULT), 0);
  }
  std::vector<uint8_t> px(4);
  BoxList b;
  expect_error([&] { ds->read({0}, px.data(), nullptr, &b); }, {"c.h5", "classification dataset"});
}

TEST(DetectFormat, WrongKindOfDatasetGetsOneLine) {
  TempDir dir;
  pack(*open_synthetic(1, 10, 1, 2, 2, 3), quiet_to(dir / "cls.h5"));
  const std::string det = packed_three(dir, "det.h5");
  auto c = Dataset::open(dir / "cls.h5"), d = Dataset::open(det);
  require_detection(d->info(), "model yolov5n.yaml");
  require_classification(c->info(), "model resnet20");
  expect_error([&] { require_detection(c->info(), "model yolov5n.yaml"); },
               {"cls.h5", "a classification dataset (no /boxes)", "model yolov5n.yaml needs a detection dataset"});
  expect_error([&] { require_classification(d->info(), "model resnet20"); },
               {"det.h5", "a detection dataset (with /boxes)", "model resnet20 needs a classification dataset"});
}

TEST(DetectFormat, BadBoxesAreRefusedNamingFileAndEntry) {
  TempDir dir;
  struct Case {
    const char* name;
    int64_t row;
    int field;
    float value;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"outside.h5", 2, 1, 0.95f, {"outside.h5", "box 2 (sample 2)", "lies outside [0, 1]"}},
      {"negative.h5", 0, 2, -0.1f, {"negative.h5", "box 0 (sample 0)", "lies outside [0, 1]"}},
      {"zero.h5", 1, 3, 0.0f, {"zero.h5", "box 1 (sample 2)", "zero size"}},
      {"class.h5", 0, 0, 3.0f, {"class.h5", "box 0 (sample 0)", "class 3 is not an integer in [0, 3)"}},
      {"fraction.h5", 1, 0, 0.5f, {"fraction.h5", "box 1 (sample 2)", "class 0.5"}},
      {"nan.h5", 2, 4, std::nanf(""), {"nan.h5", "box 2 (sample 2)", "not finite"}},
  };
  for (const auto& c : cases) {
    const std::string p = packed_three(dir, c.name);
    Dataset::open(p);  // valid as packed
    set_box_field(p, c.row, c.field, c.value);
    expect_error([&] { Dataset::open(p); }, c.needles);
  }
}

TEST(DetectFormat, OffsetsThatDoNotAddUpAreRefused) {
  TempDir dir;
  const std::string a = packed_three(dir, "end.h5"), b = packed_three(dir, "dec.h5"), c = packed_three(dir, "first.h5");
  set_offsets(a, {0, 1, 1, 2});
  expect_error([&] { Dataset::open(a); }, {"end.h5", "/box_offsets do not add up", "end at 2", "3 rows"});
  set_offsets(b, {0, 2, 1, 3});
  expect_error([&] { Dataset::open(b); }, {"dec.h5", "/box_offsets decreases at sample 1"});
  set_offsets(c, {1, 1, 1, 3});
  expect_error([&] { Dataset::open(c); }, {"first.h5", "/box_offsets[0] is 1"});
  const std::string d = packed_three(dir, "count.h5"), e = packed_three(dir, "attr.h5");
  edit(d, [](hid_t f) {
    H5Ldelete(f, "box_offsets", H5P_DEFAULT);
    hsize_t n = 3;
    h5::Id space(H5Screate_simple(1, &n, nullptr));
    h5::Id ds(H5Dcreate2(f, "box_offsets", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    int64_t v[3] = {0, 1, 1};
    H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
  });
  expect_error([&] { Dataset::open(d); }, {"count.h5", "/box_offsets holds 3 entries, expected N+1 = 4"});
  edit(e, [](hid_t f) { h5::write_int_attr(f, "num_boxes", 7, H5T_STD_I64LE); });
  expect_error([&] { Dataset::open(e); }, {"attr.h5", "'num_boxes' says 7", "3 rows"});
}

TEST(DetectFormat, MissingArraysAndMismatchedTaskAreRefused) {
  TempDir dir;
  const std::string a = packed_three(dir, "nobox.h5"), b = packed_three(dir, "notask.h5");
  edit(a, [](hid_t f) { H5Ldelete(f, "boxes", H5P_DEFAULT); });
  expect_error([&] { Dataset::open(a); }, {"nobox.h5", "detection dataset without /boxes"});
  edit(b, [](hid_t f) { H5Adelete(f, "task"); });
  expect_error([&] { Dataset::open(b); }, {"notask.h5", "has /boxes but is not marked as a detection dataset"});
  const std::string c = packed_three(dir, "task.h5");
  edit(c, [](hid_t f) { h5::write_string_attr(f, "task", "segmentation"); });
  expect_error([&] { Dataset::open(c); }, {"task.h5", "attribute 'task' is 'segmentation'"});
}

TEST(DetectFormat, ShardSetChecksEveryShardsBoxesWhenOpened) {
  TempDir dir;
  BoxSource src(varied_boxes(12, 3, 5), 1, 2, 2, 3);
  PackOptions o = quiet_to(dir / "s.h5");
  o.shards = 3;
  pack(src, o);
  const std::string shard = shard_path(dir / "s.h5", 2, 3);
  // Shard 2 holds samples 8..11: sample 9 has one box (row 0 of the shard).
  set_box_field(shard, 0, 3, 2.0f);
  expect_error([&] { Dataset::open(dir / "s.h5"); }, {"s-00002-of-00003.h5", "box 0 (sample 1)", "outside [0, 1]"});
}

TEST(DetectFormat, WriterRefusesBadBoxesAndLeavesNothing) {
  TempDir dir;
  BoxSource bad({{0, 0.5f, 0.5f, 0.1f, 0.1f}, {1, 0.95f, 0.5f, 0.2f, 0.1f}}, 1, 2, 2, 2);
  expect_error([&] { pack(bad, quiet_to(dir / "b.h5")); }, {"b.h5", "sample 1: box 0", "lies outside [0, 1]"});
  BoxSource zero({{0, 0.5f, 0.5f, 0.0f, 0.1f}}, 1, 2, 2, 2);
  expect_error([&] { pack(zero, quiet_to(dir / "z.h5")); }, {"z.h5", "sample 0: box 0", "zero size"});
  EXPECT_TRUE(dir.files().empty());
}

TEST(DetectFormat, ImagesWithoutBoxesAndAllEmptyAreFine) {
  TempDir dir;
  BoxSource src(std::vector<std::vector<float>>(5), 1, 2, 2, 2);
  pack(src, quiet_to(dir / "e.h5"));
  auto ds = Dataset::open(dir / "e.h5");
  EXPECT_TRUE(ds->has_boxes());
  EXPECT_EQ(ds->info().num_boxes, 0);
  BoxList b;
  std::vector<uint8_t> px(8);
  ds->read({4, 0}, px.data(), nullptr, &b);
  EXPECT_EQ(b.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_TRUE(b.rows.empty());
}
