// data/h5util.hpp — small HDF5 helpers for the dataset format: an owning hid_t, attribute I/O and the
// innermost message of HDF5's error stack (so errors read "truncated file" rather than "H5Fopen failed").
// Callers hold hetrain::data::hdf5_mutex().
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::data::h5 {

// Owns one HDF5 identifier of any kind and closes it with H5Idec_ref.
class Id {
 public:
  Id() = default;
  explicit Id(hid_t id) : id_(id) {}
  ~Id() { reset(); }
  Id(Id&& o) noexcept : id_(o.id_) { o.id_ = -1; }
  Id& operator=(Id&& o) noexcept { if (this != &o) { reset(); id_ = o.id_; o.id_ = -1; } return *this; }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = -1;
};

// Turns off HDF5's automatic error printing (we report errors ourselves). Idempotent.
void quiet();
// The innermost description on the current HDF5 error stack, e.g. "truncated file: eof = 1000, ...".
std::string last_error();

bool has_attr(hid_t obj, const char* name);
std::string read_string_attr(hid_t obj, const char* name, const std::string& file);
int64_t read_int_attr(hid_t obj, const char* name, const std::string& file);
std::vector<float> read_float_array_attr(hid_t obj, const char* name, const std::string& file);
std::vector<std::string> read_string_array_attr(hid_t obj, const char* name, const std::string& file);
std::vector<int64_t> read_int_array_attr(hid_t obj, const char* name, const std::string& file);

void write_string_attr(hid_t obj, const char* name, const std::string& value);
void write_int_attr(hid_t obj, const char* name, int64_t value, hid_t type = H5T_STD_I32LE);
void write_float_array_attr(hid_t obj, const char* name, const std::vector<float>& values);
void write_int_array_attr(hid_t obj, const char* name, const std::vector<int64_t>& values);
void write_string_array_attr(hid_t obj, const char* name, const std::vector<std::string>& values);

// 1-D dataset of variable-length strings / int64 (the shard index).
void write_string_dataset(hid_t loc, const char* name, const std::vector<std::string>& values);
std::vector<std::string> read_string_dataset(hid_t loc, const char* name, const std::string& file);

}  // namespace hetrain::data::h5
