// Detection boxes in dataset files: the validity rule, and reading /boxes + /box_offsets of one file
// (docs/dataset-format.md, "Detection datasets"). Boxes are small (20 bytes each), so a file's boxes are
// read and checked when it is opened and then served from memory, as its labels are.
#include "data/boxes.hpp"

#include <sys/stat.h>

#include <cmath>
#include <sstream>

#include "data/h5util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

std::string box_problem(const float* b, int num_classes) {
  const float cls = b[0], cx = b[1], cy = b[2], w = b[3], h = b[4];
  std::ostringstream os;
  for (int k = 0; k < kBoxFields; ++k)
    if (!std::isfinite(b[k])) return "has a value that is not finite";
  if (cls != std::floor(cls) || cls < 0 || cls >= float(num_classes)) {
    os << "class " << cls << " is not an integer in [0, " << num_classes << ")";
    return os.str();
  }
  if (!(w > 0 && h > 0)) {
    os << "has zero size (w " << w << ", h " << h << ")";
    return os.str();
  }
  // The edges in double: cx ± w/2 of floats in [0, 1] is then exact enough to compare with the slack.
  const double x0 = double(cx) - double(w) / 2, x1 = double(cx) + double(w) / 2;
  const double y0 = double(cy) - double(h) / 2, y1 = double(cy) + double(h) / 2;
  const double lo = -double(kBoxEdgeSlack), hi = 1 + double(kBoxEdgeSlack);
  if (x0 < lo || x1 > hi || y0 < lo || y1 > hi) {
    os << "lies outside [0, 1] (cx " << cx << ", cy " << cy << ", w " << w << ", h " << h << ": x " << x0 << ".."
       << x1 << ", y " << y0 << ".." << y1 << ")";
    return os.str();
  }
  return "";
}

namespace {
// Opens a dataset of the file and checks its rank and element class; returns its dimensions.
std::vector<hsize_t> open_array(hid_t file, const char* name, const std::string& path, H5T_class_t cls, int ndims,
                                const char* what, h5::Id& out) {
  HT_CHECK(H5Lexists(file, name, H5P_DEFAULT) > 0, path, ": detection dataset without /", name,
           " (task is \"detection\")");
  out = h5::Id(H5Dopen2(file, name, H5P_DEFAULT));
  HT_CHECK(out.valid(), path, ": cannot open /", name, ": ", h5::last_error());
  h5::Id t(H5Dget_type(out));
  h5::Id sp(H5Dget_space(out));
  HT_CHECK(H5Tget_class(t) == cls && H5Sget_simple_extent_ndims(sp) == ndims, path, ": /", name, " must be ", what);
  std::vector<hsize_t> d(size_t(ndims), 0);
  H5Sget_simple_extent_dims(sp, d.data(), nullptr);
  return d;
}

// As for /images (dataset.cpp), a damaged file may claim more rows than it stores: refuse before allocating.
void check_file_holds_boxes(const std::string& path, hid_t boxes, int64_t m) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return;
  h5::Id dcpl(H5Dget_create_plist(boxes));
  const bool filtered = dcpl.valid() && H5Pget_nfilters(dcpl) > 0;
  const double need = double(m) * kBoxFields * sizeof(float) / (filtered ? 1100 : 1);
  HT_CHECK(need <= double(st.st_size), path, ": /boxes claims ", m, " boxes, more than its ", st.st_size,
           " bytes can hold (damaged, or not written by hetrain-pack)");
}
}  // namespace

FileBoxes read_file_boxes(hid_t file, const std::string& path, int64_t n, int num_classes) {
  h5::Id boxes, offsets;
  const auto bd = open_array(file, "boxes", path, H5T_FLOAT, 2, "float32 [M, 5]", boxes);
  HT_CHECK(bd[1] == kBoxFields, path, ": /boxes must be float32 [M, 5] (class, cx, cy, w, h), has ", bd[1],
           " columns");
  const auto od = open_array(file, "box_offsets", path, H5T_INTEGER, 1, "int64 [N+1]", offsets);
  HT_CHECK(int64_t(od[0]) == n + 1, path, ": /box_offsets holds ", od[0], " entries, expected N+1 = ", n + 1);
  const int64_t m = int64_t(bd[0]);
  if (h5::has_attr(file, "num_boxes")) {
    const int64_t claimed = h5::read_int_attr(file, "num_boxes", path);
    HT_CHECK(claimed == m, path, ": attribute 'num_boxes' says ", claimed, " but /boxes holds ", m, " rows");
  }
  check_file_holds_boxes(path, boxes, m);

  FileBoxes fb;
  fb.offsets.resize(size_t(n + 1));
  HT_CHECK(H5Dread(offsets, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, fb.offsets.data()) >= 0, path,
           ": cannot read /box_offsets: ", h5::last_error());
  HT_CHECK(fb.offsets[0] == 0, path, ": /box_offsets[0] is ", fb.offsets[0], ", must be 0");
  for (int64_t i = 0; i < n; ++i)
    HT_CHECK(fb.offsets[i + 1] >= fb.offsets[i], path, ": /box_offsets decreases at sample ", i, " (",
             fb.offsets[i], " then ", fb.offsets[i + 1], ")");
  HT_CHECK(fb.offsets[n] == m, path, ": /box_offsets do not add up: they end at ", fb.offsets[n], " but /boxes holds ",
           m, " rows");
  fb.rows.resize(size_t(m) * kBoxFields);
  if (m > 0)
    HT_CHECK(H5Dread(boxes, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, fb.rows.data()) >= 0, path,
             ": cannot read /boxes: ", h5::last_error());
  // Offsets are sorted, so the sample of each row is found by walking both together.
  int64_t sample = 0;
  for (int64_t r = 0; r < m; ++r) {
    while (fb.offsets[sample + 1] <= r) ++sample;
    const std::string why = box_problem(&fb.rows[size_t(r) * kBoxFields], num_classes);
    HT_CHECK(why.empty(), path, ": box ", r, " (sample ", sample, ") ", why);
  }
  return fb;
}

void append_sample_boxes(const FileBoxes& from, int64_t local_index, std::vector<float>& rows,
                         std::vector<int64_t>& offsets) {
  const int64_t b = from.offsets[local_index], e = from.offsets[local_index + 1];
  rows.insert(rows.end(), from.rows.begin() + b * kBoxFields, from.rows.begin() + e * kBoxFields);
  offsets.push_back(offsets.back() + (e - b));
}

namespace {
std::string kind(const DatasetInfo& info) {
  return info.has_boxes ? "a detection dataset (with /boxes)" : "a classification dataset (no /boxes)";
}
}  // namespace

void require_detection(const DatasetInfo& info, const std::string& who) {
  HT_CHECK(info.has_boxes, info.path, ": ", kind(info), ", but ", who,
           " needs a detection dataset (pack one with hetrain-pack detect-synthetic or coco; docs/detection.md)");
}

void require_classification(const DatasetInfo& info, const std::string& who) {
  HT_CHECK(!info.has_boxes, info.path, ": ", kind(info), ", but ", who,
           " needs a classification dataset (one label per image; docs/dataset-format.md)");
}

}  // namespace hetrain::data
