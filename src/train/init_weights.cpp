#include "train/init_weights.hpp"

#include <hdf5.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "data/h5util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::train {
namespace {

namespace h5 = data::h5;
using h5::Id;

constexpr const char* kCheckpointFormat = "hetrain-checkpoint";
constexpr const char* kWeightsFormat = "hetrain-weights";

// The names in `group`, in byte order (HDF5's name index: strcmp).
std::vector<std::string> names_in(hid_t file, const std::string& group) {
  std::vector<std::string> names;
  if (H5Lexists(file, group.c_str(), H5P_DEFAULT) <= 0) return names;
  Id g(H5Gopen2(file, group.c_str(), H5P_DEFAULT));
  H5G_info_t info;
  if (!g.valid() || H5Gget_info(g, &info) < 0) return names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t n = H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n < 0) continue;
    std::string name(size_t(n), '\0');
    H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), size_t(n) + 1, H5P_DEFAULT);
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A dataset's shape and whether it is float32 (else int64, the only other type the files hold).
struct DatasetFacts {
  Shape shape;
  bool is_float = false, ok = false;
};
DatasetFacts facts_of(hid_t d) {
  DatasetFacts f;
  Id type(H5Dget_type(d)), space(H5Dget_space(d));
  const int rank = H5Sget_simple_extent_ndims(space);
  if (rank < 0) return f;
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  f.shape.assign(dims.begin(), dims.end());
  const H5T_class_t c = H5Tget_class(type);
  f.is_float = c == H5T_FLOAT && H5Tget_size(type) == 4;
  f.ok = f.is_float || (c == H5T_INTEGER && H5Tget_size(type) == 8);
  return f;
}

// Reads every tensor of `groups` (each in byte order of names), for the checksum and by name.
struct FileTensor {
  Shape shape;
  std::vector<float> values;
};
struct FileTensors {
  std::map<std::string, FileTensor> floats;  // "group/name" → the float32 tensors
  uint32_t crc = 0;
};
FileTensors read_groups(hid_t file, const std::vector<std::string>& groups, const std::string& path) {
  FileTensors t;
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const std::string& group : groups)
    for (const std::string& name : names_in(file, group)) {
      const std::string where = group + "/" + name;
      Id d(H5Dopen2(file, where.c_str(), H5P_DEFAULT));
      const DatasetFacts f = d.valid() ? facts_of(d) : DatasetFacts();
      HT_CHECK(f.ok, path, ": /", where, " is not a float32 or int64 tensor");
      const int64_t n = shape_numel(f.shape);
      std::vector<char> bytes(size_t(n) * (f.is_float ? 4 : 8));
      HT_CHECK(n == 0 || H5Dread(d, f.is_float ? H5T_IEEE_F32LE : H5T_STD_I64LE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                 bytes.data()) >= 0,
               path, ": cannot read /", where, ": ", h5::last_error());
      for (size_t off = 0; off < bytes.size(); off += size_t(1) << 30)
        crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()) + off,
                    uInt(std::min(bytes.size() - off, size_t(1) << 30)));
      if (!f.is_float) continue;
      FileTensor& out = t.floats[where];
      out.shape = f.shape;
      out.values.resize(static_cast<size_t>(n));
      std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(out.values.data()));
      const std::string bad = nn::describe_nonfinite({{"/" + where, f.shape, nn::ParamKind::Bias, 0}}, out.values.data());
      HT_CHECK(bad.empty(), path, ": its tensor ", bad, ": refusing to start from non-finite weights");
    }
  t.crc = uint32_t(crc);
  return t;
}

// Copies the file's tensor `group/name` over `out` when its shape is `shape`; false when it has none.
bool take(const FileTensors& t, const std::string& group, const std::string& name, const Shape& shape, float* out) {
  const auto it = t.floats.find(group + "/" + name);
  if (it == t.floats.end() || it->second.shape != shape) return false;
  std::copy(it->second.values.begin(), it->second.values.end(), out);
  return true;
}

}  // namespace

InitialWeights read_initial_weights(const std::string& path, const nn::ParamBuffer& params) {
  std::lock_guard<std::mutex> lock(data::hdf5_mutex());
  h5::quiet();
  struct stat st {};
  HT_CHECK(::stat(path.c_str(), &st) == 0, "--init-from ", path, ": ",
           errno == ENOENT ? "no such file" : std::strerror(errno));
  HT_CHECK(H5Fis_hdf5(path.c_str()) > 0, path, ": --init-from needs a hetrain checkpoint or weights file (HDF5)");
  Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  HT_CHECK(file.valid(), path, ": cannot open as HDF5: ", h5::last_error());
  const std::string format = h5::has_attr(file, "format") ? h5::read_string_attr(file, "format", path) : "";
  const bool checkpoint = format == kCheckpointFormat;
  HT_CHECK(checkpoint || format == kWeightsFormat, path, ": not a hetrain checkpoint or weights file (format ",
           quoted(format), "; data_tools/torch_to_hetrain.py converts a PyTorch state_dict)");
  HT_CHECK(h5::read_int_attr(file, "version", path) == 1, path, ": version ", h5::read_int_attr(file, "version", path),
           " is not supported (this hetrain reads 1)");
  // The checksum covers the groups the format lists, in its order (docs/checkpoint-format.md).
  std::vector<std::string> groups = {"parameters", "buffers"};
  if (checkpoint) groups.insert(groups.end(), {"optimizer/momentum_buffer", "ema/parameters", "ema/buffers"});
  const FileTensors t = read_groups(file, groups, path);
  const uint64_t stored = uint64_t(h5::read_int_attr(file, "checksum_crc32", path));
  HT_CHECK(stored == t.crc, path, ": checksum mismatch (stored ", stored, ", computed ", t.crc,
           "): the tensors were changed or damaged after writing");

  const bool averaged = checkpoint && H5Lexists(file, "ema", H5P_DEFAULT) > 0;
  const std::string prefix = averaged ? "ema/" : "";
  InitialWeights w;
  const Tensor values = params.values().to(Device::CPU), states = params.states().to(Device::CPU);
  w.values.assign(values.data(), values.data() + params.count());
  w.states.assign(states.data(), states.data() + params.state_count());
  for (const nn::ParamSpec& s : params.specs()) {
    if (take(t, prefix + "parameters", s.name, s.shape, w.values.data() + s.offset)) ++w.loaded;
    else w.kept.push_back(s.name);
  }
  for (const nn::ParamSpec& s : params.state_specs()) {
    if (take(t, prefix + "buffers", s.name, s.shape, w.states.data() + s.offset)) ++w.loaded;
    else w.kept.push_back(s.name);
  }
  HT_CHECK(w.loaded > 0, path, ": none of its tensors is one of this model's (by name and shape): written for "
           "another model?");
  if (checkpoint)
    w.what = "checkpoint step " + std::to_string(h5::read_int_attr(file, "global_step", path)) +
             (averaged ? ", its moving average of the weights" : "");
  else
    w.what = "weights" + (h5::has_attr(file, "source") ? " of " + h5::read_string_attr(file, "source", path) : "");
  return w;
}

std::string initial_weights_note(const std::string& path, const InitialWeights& w) {
  std::string note = "init-from: " + path + " (" + w.what + "): " + std::to_string(w.loaded) + " tensors loaded";
  if (w.kept.empty()) return note + ", every tensor of the model";
  note += "; " + std::to_string(w.kept.size()) + " keep their initialisation (not in the file in this shape): ";
  for (size_t i = 0; i < w.kept.size() && i < 6; ++i) note += (i ? ", " : "") + w.kept[i];
  if (w.kept.size() > 6) note += ", ...";
  return note;
}

}  // namespace hetrain::train
