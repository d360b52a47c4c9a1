#include "data/h5util.hpp"

#include <algorithm>

#include "hetrain/error.hpp"

namespace hetrain::data::h5 {

void Id::reset() {
  if (id_ >= 0 && H5Iis_valid(id_) > 0) H5Idec_ref(id_);
  id_ = -1;
}

void quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string last_error() {
  std::string innermost;
  auto walk = [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
    // H5E_WALK_UPWARD visits the innermost (root cause) first; keep that one.
    auto* out = static_cast<std::string*>(data);
    if (n == 0 && e->desc) *out = e->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &innermost);
  H5Eclear2(H5E_DEFAULT);
  if (innermost.empty()) return "unknown HDF5 error";
  // A failed system call reads "file write failed: time = ...\n, filename = ..., errno = 28, error message =
  // 'No space left on device', buf = ...": the first words and the system's message make one line.
  const std::string tag = "error message = '";
  const size_t at = innermost.find(tag);
  if (at != std::string::npos) {
    const size_t end = innermost.find('\'', at + tag.size());
    const size_t cut = innermost.find_first_of(":\n");
    innermost = innermost.substr(0, std::min(cut, at)) + ": " +
                innermost.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size());
  }
  for (char& ch : innermost)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return innermost;
}

bool has_attr(hid_t obj, const char* name) { return H5Aexists(obj, name) > 0; }

namespace {
Id open_attr(hid_t obj, const char* name, const std::string& file) {
  HT_CHECK(has_attr(obj, name), file, ": missing attribute '", name, "'");
  Id a(H5Aopen(obj, name, H5P_DEFAULT));
  HT_CHECK(a.valid(), file, ": cannot open attribute '", name, "': ", last_error());
  return a;
}
int64_t attr_count(hid_t attr) {
  Id space(H5Aget_space(attr));
  hssize_t n = H5Sget_simple_extent_npoints(space);
  return n < 0 ? 0 : n;
}
}  // namespace

std::string read_string_attr(hid_t obj, const char* name, const std::string& file) {
  auto vals = read_string_array_attr(obj, name, file);
  HT_CHECK(vals.size() == 1, file, ": attribute '", name, "' should hold one string, holds ", vals.size());
  return vals[0];
}

std::vector<std::string> read_string_array_attr(hid_t obj, const char* name, const std::string& file) {
  Id a = open_attr(obj, name, file);
  Id ftype(H5Aget_type(a));
  HT_CHECK(H5Tget_class(ftype) == H5T_STRING, file, ": attribute '", name, "' is not a string");
  int64_t n = attr_count(a);
  std::vector<std::string> out(n);
  if (H5Tis_variable_str(ftype) > 0) {
    Id mtype(H5Tcopy(H5T_C_S1));
    H5Tset_size(mtype, H5T_VARIABLE);
    H5Tset_cset(mtype, H5Tget_cset(ftype));
    std::vector<char*> ptrs(n, nullptr);
    HT_CHECK(H5Aread(a, mtype, ptrs.data()) >= 0, file, ": cannot read attribute '", name, "': ", last_error());
    for (int64_t i = 0; i < n; ++i) out[i] = ptrs[i] ? ptrs[i] : "";
    Id space(H5Aget_space(a));
    H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, ptrs.data());
  } else {
    size_t len = H5Tget_size(ftype);
    std::vector<char> buf(n * len + 1, '\0');
    HT_CHECK(H5Aread(a, ftype, buf.data()) >= 0, file, ": cannot read attribute '", name, "': ", last_error());
    for (int64_t i = 0; i < n; ++i) {
      const char* s = buf.data() + i * len;
      size_t l = 0;
      while (l < len && s[l]) ++l;
      out[i].assign(s, l);
    }
  }
  return out;
}

std::vector<int64_t> read_int_array_attr(hid_t obj, const char* name, const std::string& file) {
  Id a = open_attr(obj, name, file);
  Id ftype(H5Aget_type(a));
  HT_CHECK(H5Tget_class(ftype) == H5T_INTEGER, file, ": attribute '", name, "' is not an integer");
  std::vector<int64_t> out(attr_count(a));
  HT_CHECK(H5Aread(a, H5T_NATIVE_INT64, out.data()) >= 0, file, ": cannot read attribute '", name, "'");
  return out;
}

int64_t read_int_attr(hid_t obj, const char* name, const std::string& file) {
  auto v = read_int_array_attr(obj, name, file);
  HT_CHECK(v.size() == 1, file, ": attribute '", name, "' should hold one integer, holds ", v.size());
  return v[0];
}

std::vector<float> read_float_array_attr(hid_t obj, const char* name, const std::string& file) {
  Id a = open_attr(obj, name, file);
  Id ftype(H5Aget_type(a));
  HT_CHECK(H5Tget_class(ftype) == H5T_FLOAT, file, ": attribute '", name, "' is not floating point");
  std::vector<float> out(attr_count(a));
  HT_CHECK(H5Aread(a, H5T_NATIVE_FLOAT, out.data()) >= 0, file, ": cannot read attribute '", name, "'");
  return out;
}

namespace {
void write_attr(hid_t obj, const char* name, hid_t ftype, hid_t mtype, hsize_t n, bool scalar, const void* data) {
  if (has_attr(obj, name)) H5Adelete(obj, name);
  Id space(scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr));
  Id a(H5Acreate2(obj, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT));
  HT_CHECK(a.valid() && H5Awrite(a, mtype, data) >= 0, "cannot write attribute '", name, "': ", last_error());
}
Id vlen_utf8() {
  Id t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  return t;
}
}  // namespace

void write_string_attr(hid_t obj, const char* name, const std::string& value) {
  Id t = vlen_utf8();
  const char* p = value.c_str();
  write_attr(obj, name, t, t, 1, true, &p);
}

void write_int_attr(hid_t obj, const char* name, int64_t value, hid_t type) {
  write_attr(obj, name, type, H5T_NATIVE_INT64, 1, true, &value);
}

void write_float_array_attr(hid_t obj, const char* name, const std::vector<float>& values) {
  write_attr(obj, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, values.size(), false, values.data());
}

void write_int_array_attr(hid_t obj, const char* name, const std::vector<int64_t>& values) {
  write_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, values.size(), false, values.data());
}

void write_string_array_attr(hid_t obj, const char* name, const std::vector<std::string>& values) {
  Id t = vlen_utf8();
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  write_attr(obj, name, t, t, values.size(), false, ptrs.data());
}

void write_string_dataset(hid_t loc, const char* name, const std::vector<std::string>& values) {
  Id t = vlen_utf8();
  hsize_t n = values.size();
  Id space(H5Screate_simple(1, &n, nullptr));
  Id d(H5Dcreate2(loc, name, t, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  HT_CHECK(d.valid() && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) >= 0,
           "cannot write dataset '", name, "': ", last_error());
}

std::vector<std::string> read_string_dataset(hid_t loc, const char* name, const std::string& file) {
  Id d(H5Dopen2(loc, name, H5P_DEFAULT));
  HT_CHECK(d.valid(), file, ": missing dataset '", name, "'");
  Id ftype(H5Dget_type(d));
  HT_CHECK(H5Tget_class(ftype) == H5T_STRING && H5Tis_variable_str(ftype) > 0, file, ": dataset '", name,
           "' is not variable-length strings");
  Id space(H5Dget_space(d));
  hssize_t n = H5Sget_simple_extent_npoints(space);
  Id mtype = vlen_utf8();
  std::vector<char*> ptrs(n, nullptr);
  HT_CHECK(H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) >= 0, file, ": cannot read '", name, "'");
  std::vector<std::string> out;
  for (auto* p : ptrs) out.emplace_back(p ? p : "");
  H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, ptrs.data());
  return out;
}

}  // namespace hetrain::data::h5
