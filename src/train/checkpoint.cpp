// Checkpoint files (docs/checkpoint-format.md): HDF5 layout, atomic writing, verified reading, the folder.
#include "train/checkpoint.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <type_traits>

#include "data/h5util.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::train {

namespace h5 = data::h5;
using h5::Id;

namespace {

constexpr const char* kFormat = "hetrain-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kPrefix = "checkpoint-";
constexpr const char* kSuffix = ".h5";

std::string utc_now() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One tensor dataset of the file: where it lives, its shape, and its bytes in host memory.
struct TensorEntry {
  std::string group, name;
  Shape shape;   // empty: a scalar
  bool is_int64 = false;
  const void* data = nullptr;  // for writing
  void* out = nullptr;         // for reading
  size_t bytes() const { return size_t(is_int64 ? 8 : 4) * size_t(shape_numel(shape)); }
};

// The file's tensors in checksum order: group by group, names in byte order inside a group.
std::vector<TensorEntry> tensor_entries(const nn::ParamBuffer& layout, const CheckpointTensors& t,
                                        CheckpointTensors* fill) {
  std::vector<TensorEntry> params, buffers, momentum;
  for (const nn::ParamSpec& s : layout.specs()) {
    TensorEntry e{"parameters", s.name, s.shape, false, t.values.data() + s.offset,
                  fill ? fill->values.data() + s.offset : nullptr};
    params.push_back(e);
    e.group = "optimizer/momentum_buffer";
    e.data = t.momentum.data() + s.offset;
    e.out = fill ? fill->momentum.data() + s.offset : nullptr;
    momentum.push_back(e);
  }
  std::vector<std::string> bn_layers;
  for (const nn::ParamSpec& s : layout.state_specs()) {
    buffers.push_back({"buffers", s.name, s.shape, false, t.states.data() + s.offset,
                       fill ? fill->states.data() + s.offset : nullptr});
    const std::string suffix = ".running_mean";
    if (s.name.size() > suffix.size() && s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      bn_layers.push_back(s.name.substr(0, s.name.size() - suffix.size()));
  }
  for (const std::string& layer : bn_layers)
    buffers.push_back({"buffers", layer + ".num_batches_tracked", {}, true, &t.num_batches_tracked,
                       fill ? &fill->num_batches_tracked : nullptr});
  // The moving average's tensors, after the others: a file without one checksums as before.
  std::vector<TensorEntry> ema_params, ema_buffers;
  if (t.has_ema()) {
    for (const nn::ParamSpec& s : layout.specs())
      ema_params.push_back({"ema/parameters", s.name, s.shape, false, t.ema_values.data() + s.offset,
                            fill ? fill->ema_values.data() + s.offset : nullptr});
    for (const nn::ParamSpec& s : layout.state_specs())
      ema_buffers.push_back({"ema/buffers", s.name, s.shape, false, t.ema_states.data() + s.offset,
                             fill ? fill->ema_states.data() + s.offset : nullptr});
  }
  // PowerSGD's state, last: "error" then "q", in byte order like every group.
  std::vector<TensorEntry> powersgd;
  if (t.has_powersgd()) {
    powersgd.push_back({"powersgd", "error", {t.powersgd_rows, layout.count()}, false, t.powersgd_error.data(),
                        fill ? fill->powersgd_error.data() : nullptr});
    powersgd.push_back({"powersgd", "q", {int64_t(t.powersgd_q.size())}, false, t.powersgd_q.data(),
                        fill ? fill->powersgd_q.data() : nullptr});
  }
  auto by_name = [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; };
  std::vector<TensorEntry> all;
  for (auto* group : {&params, &buffers, &momentum, &ema_params, &ema_buffers, &powersgd}) {
    std::sort(group->begin(), group->end(), by_name);
    all.insert(all.end(), group->begin(), group->end());
  }
  return all;
}

// The first float tensor of `entries` holding NaN/Inf (of what was written, or of what was read), as
// "/parameters/conv1.weight (3 of 150 values are NaN/Inf, the first at element 12)"; empty when none.
std::string first_nonfinite(const std::vector<TensorEntry>& entries, bool of_output) {
  for (const TensorEntry& e : entries) {
    if (e.is_int64) continue;
    const nn::ParamSpec spec{"/" + e.group + "/" + e.name, e.shape, nn::ParamKind::Bias, 0};
    const std::string bad = nn::describe_nonfinite({spec}, static_cast<const float*>(of_output ? e.out : e.data));
    if (!bad.empty()) return bad;
  }
  return "";
}

uint32_t checksum(const std::vector<TensorEntry>& entries, bool of_output) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const TensorEntry& e : entries) {
    const auto* p = static_cast<const Bytef*>(of_output ? e.out : e.data);
    size_t left = e.bytes();
    while (left > 0) {  // zlib takes uInt lengths
      const uInt chunk = uInt(std::min<size_t>(left, size_t(1) << 30));
      crc = crc32(crc, p, chunk);
      p += chunk;
      left -= chunk;
    }
  }
  return uint32_t(crc);
}

// A scalar attribute held in memory as `T` (double or uint64_t) and stored as `file_type`.
template <typename T>
hid_t native_type() {
  static_assert(std::is_same_v<T, double> || std::is_same_v<T, uint64_t>, "double or uint64_t");
  return std::is_same_v<T, double> ? H5T_NATIVE_DOUBLE : H5T_NATIVE_UINT64;
}

template <typename T>
void write_scalar_attr(hid_t obj, const char* name, T value, hid_t file_type) {
  Id space(H5Screate(H5S_SCALAR));
  Id a(H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT));
  HT_CHECK(a.valid() && H5Awrite(a, native_type<T>(), &value) >= 0, "cannot write attribute '", name, "': ",
           h5::last_error());
}

template <typename T>
T read_scalar_attr(hid_t obj, const char* name, const std::string& file) {
  HT_CHECK(h5::has_attr(obj, name), file, ": missing attribute '", name, "'");
  Id a(H5Aopen(obj, name, H5P_DEFAULT));
  T v = 0;
  HT_CHECK(a.valid() && H5Aread(a, native_type<T>(), &v) >= 0, file, ": cannot read attribute '", name, "'");
  return v;
}

void write_float_attr(hid_t obj, const char* name, double value) {
  write_scalar_attr<double>(obj, name, value, H5T_IEEE_F32LE);
}
double read_float_attr(hid_t obj, const char* name, const std::string& file) {
  return read_scalar_attr<double>(obj, name, file);
}
void write_u64_attr(hid_t obj, const char* name, uint64_t value, hid_t type) {
  write_scalar_attr<uint64_t>(obj, name, value, type);
}
uint64_t read_u64_attr(hid_t obj, const char* name, const std::string& file) {
  return read_scalar_attr<uint64_t>(obj, name, file);
}

Id make_group(hid_t loc, const char* name) {
  Id g(H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  HT_CHECK(g.valid(), "cannot create group '", name, "': ", h5::last_error());
  return g;
}

template <typename T>
void write_array(hid_t loc, const char* name, const std::vector<T>& v, hid_t file_type, hid_t mem_type) {
  hsize_t dims[1] = {hsize_t(v.size())};
  Id space(H5Screate_simple(1, dims, nullptr));
  Id d(H5Dcreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  HT_CHECK(d.valid() && (v.empty() || H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0),
           "cannot write '", name, "': ", h5::last_error());
}

template <typename T>
std::vector<T> read_array(hid_t loc, const char* name, hid_t mem_type, const std::string& file) {
  HT_CHECK(H5Lexists(loc, name, H5P_DEFAULT) > 0, file, ": missing dataset '", name, "'");
  Id d(H5Dopen2(loc, name, H5P_DEFAULT));
  Id space(H5Dget_space(d));
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  HT_CHECK(d.valid() && n >= 0 && n < (hssize_t(1) << 32), file, ": unreadable dataset '", name, "'");
  std::vector<T> v(static_cast<size_t>(n));
  HT_CHECK(n == 0 || H5Dread(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0, file,
           ": cannot read dataset '", name, "': ", h5::last_error());
  return v;
}

void write_tensor(hid_t file, const TensorEntry& e) {
  std::vector<hsize_t> dims(e.shape.begin(), e.shape.end());
  Id space(e.shape.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(int(dims.size()), dims.data(), nullptr));
  const std::string path = e.group + "/" + e.name;
  Id d(H5Dcreate2(file, path.c_str(), e.is_int64 ? H5T_STD_I64LE : H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                  H5P_DEFAULT));
  HT_CHECK(d.valid(), "cannot create dataset '", path, "': ", h5::last_error());
  HT_CHECK(H5Dwrite(d, e.is_int64 ? H5T_NATIVE_INT64 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, e.data) >= 0,
           "cannot write dataset '", path, "': ", h5::last_error());
}

void read_tensor(hid_t file, const TensorEntry& e, const std::string& where) {
  const std::string path = e.group + "/" + e.name;
  HT_CHECK(H5Lexists(file, e.group.c_str(), H5P_DEFAULT) > 0 && H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0,
           where, ": missing dataset /", path, " (written for another model, or incomplete)");
  Id d(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
  HT_CHECK(d.valid(), where, ": cannot open /", path, ": ", h5::last_error());
  Id type(H5Dget_type(d));
  const bool ok_type = e.is_int64 ? H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == 8
                                  : H5Tget_class(type) == H5T_FLOAT && H5Tget_size(type) == 4;
  HT_CHECK(ok_type, where, ": /", path, " is not ", e.is_int64 ? "int64" : "float32");
  Id space(H5Dget_space(d));
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(rank > 0 ? rank : 0);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const Shape got(dims.begin(), dims.end());
  if (got != e.shape) {
    auto text = [](const Shape& s) {
      std::string t = "[";
      for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
      return t + "]";
    };
    HT_THROW(where, ": /", path, " has shape ", text(got), ", the model needs ", text(e.shape));
  }
  HT_CHECK(H5Dread(d, e.is_int64 ? H5T_NATIVE_INT64 : H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, e.out) >= 0,
           where, ": cannot read /", path, ": ", h5::last_error());
}

// Opens a file that claims to be a checkpoint of a version we read; the message names the file.
Id open_checkpoint(const std::string& path) {
  h5::quiet();
  struct stat st {};
  HT_CHECK(::stat(path.c_str(), &st) == 0, path, ": ", std::strerror(errno));
  HT_CHECK(S_ISREG(st.st_mode), path, ": not a file");
  HT_CHECK(H5Fis_hdf5(path.c_str()) > 0, path, ": not a hetrain checkpoint (not an HDF5 file)");
  Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  HT_CHECK(file.valid(), path, ": cannot open as HDF5: ", h5::last_error(), " (truncated or damaged?)");
  const std::string format = h5::has_attr(file, "format") ? h5::read_string_attr(file, "format", path) : "";
  HT_CHECK(format == kFormat, path, ": not a hetrain checkpoint (format ", quoted(format), ")");
  const int64_t version = h5::read_int_attr(file, "version", path);
  HT_CHECK(version == kVersion, path, ": checkpoint format version ", version, " is not supported (this hetrain reads ",
           kVersion, ")");
  return file;
}

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  HT_CHECK(fd >= 0, "cannot open ", path, " to flush it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  HT_CHECK(rc == 0, "cannot flush ", path, " to disk: ", std::strerror(err));
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// "checkpoint-00000123.h5" → 123; -1 for any other name.
int64_t step_of(const std::string& name) {
  const size_t p = std::strlen(kPrefix), s = std::strlen(kSuffix);
  if (name.size() <= p + s || name.compare(0, p, kPrefix) != 0 || name.compare(name.size() - s, s, kSuffix) != 0)
    return -1;
  const std::string digits = name.substr(p, name.size() - p - s);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return -1;
  return std::stoll(digits);
}

std::vector<std::string> folder_entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) out.push_back(e->d_name);
  ::closedir(d);
  return out;
}

void write_objects(hid_t file, const std::string& tmp, const CheckpointInfo& info, const CheckpointTensors& t,
                   const std::vector<TensorEntry>& entries) {
  h5::write_string_attr(file, "format", kFormat);
  h5::write_int_attr(file, "version", kVersion);
  h5::write_string_attr(file, "created", utc_now());
  h5::write_string_attr(file, "model", info.model);
  h5::write_int_array_attr(file, "input_shape", info.input_shape);
  h5::write_int_attr(file, "num_classes", info.num_classes);
  h5::write_int_attr(file, "global_step", info.global_step, H5T_STD_I64LE);
  h5::write_int_attr(file, "epoch", info.epoch, H5T_STD_I64LE);
  h5::write_int_attr(file, "step_in_epoch", info.step_in_epoch, H5T_STD_I64LE);
  h5::write_int_attr(file, "samples_in_epoch", info.samples_in_epoch, H5T_STD_I64LE);
  h5::write_int_attr(file, "sample_position", info.sample_position, H5T_STD_I64LE);
  h5::write_int_attr(file, "steps_per_epoch", info.steps_per_epoch, H5T_STD_I64LE);
  h5::write_int_attr(file, "global_batch", info.global_batch, H5T_STD_I64LE);
  h5::write_int_attr(file, "num_samples", info.num_samples, H5T_STD_I64LE);
  write_u64_attr(file, "seed", info.seed, H5T_STD_U64LE);
  h5::write_int_attr(file, "world_size", info.world_size);
  write_u64_attr(file, "checksum_crc32", checksum(entries, false), H5T_STD_U32LE);

  std::vector<const char*> groups = {"parameters", "buffers", "optimizer", "optimizer/momentum_buffer", "schedule",
                                     "balancer"};
  if (t.has_ema()) groups.insert(groups.end(), {"ema", "ema/parameters", "ema/buffers"});
  if (t.has_powersgd()) groups.push_back("powersgd");
  for (const char* g : groups)
    make_group(file, g);
  for (const TensorEntry& e : entries) write_tensor(file, e);

  Id opt(H5Gopen2(file, "optimizer", H5P_DEFAULT));
  h5::write_string_attr(opt, "type", "sgd");
  write_float_attr(opt, "momentum", info.sgd.momentum);
  h5::write_int_attr(opt, "nesterov", info.sgd.nesterov);
  write_float_attr(opt, "weight_decay", info.sgd.weight_decay);
  h5::write_int_attr(opt, "decay_bn_and_bias", info.sgd.decay_bn_and_bias);
  if (info.loss_scale > 0) {  // a power of two: exact as float32
    write_float_attr(opt, "loss_scale", info.loss_scale);
    h5::write_int_attr(opt, "loss_scale_good_steps", info.loss_scale_good_steps, H5T_STD_I64LE);
  }

  Id sched(H5Gopen2(file, "schedule", H5P_DEFAULT));
  write_float_attr(sched, "base_lr", info.schedule.base_lr);
  write_float_attr(sched, "peak_lr", info.peak_lr);
  h5::write_int_attr(sched, "linear_scaling", info.schedule.linear_scaling);
  h5::write_int_attr(sched, "warmup_steps", info.schedule.warmup_steps, H5T_STD_I64LE);
  write_float_attr(sched, "warmup_bias_lr", info.schedule.warmup_bias_lr);
  write_float_attr(sched, "warmup_momentum", info.schedule.warmup_momentum);
  h5::write_int_attr(sched, "total_steps", info.total_steps, H5T_STD_I64LE);
  h5::write_string_attr(sched, "decay", info.schedule.decay);
  write_array(sched, "milestones", info.schedule.milestones, H5T_STD_I64LE, H5T_NATIVE_INT64);
  write_float_attr(sched, "gamma", info.schedule.gamma);

  {
    Id type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    Id space(H5Screate(H5S_SCALAR));
    Id d(H5Dcreate2(file, "config", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    const char* text = info.config_text.c_str();
    HT_CHECK(d.valid() && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) >= 0,
             "cannot write /config: ", h5::last_error());
  }
  if (t.has_ema()) {
    Id ema(H5Gopen2(file, "ema", H5P_DEFAULT));
    h5::write_int_attr(ema, "updates", t.ema_updates, H5T_STD_I64LE);
  }
  if (t.has_powersgd()) {
    Id psgd(H5Gopen2(file, "powersgd", H5P_DEFAULT));
    h5::write_int_attr(psgd, "rank", t.powersgd_rank, H5T_STD_I64LE);
  }
  Id bal(H5Gopen2(file, "balancer", H5P_DEFAULT));
  write_array(bal, "split", info.split, H5T_STD_I64LE, H5T_NATIVE_INT64);
  write_array(bal, "alpha", info.alpha, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
  write_array(bal, "beta", info.beta, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE);
  HT_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0, "cannot flush ", tmp, ": ", h5::last_error(), " (",
           std::strerror(errno), ")");
}

// The whole file is built in memory (HDF5's core driver, nothing touches the disk) and handed back as
// bytes: the disk then sees one plain write that can fail cleanly (disk full, folder gone), never a
// half-closed HDF5 file.
std::vector<char> file_image(const std::string& name, const CheckpointInfo& info, const CheckpointTensors& t,
                             const std::vector<TensorEntry>& entries) {
  size_t bytes = size_t(1) << 20;  // attributes, groups and the configuration text
  for (const TensorEntry& e : entries) bytes += e.bytes() + 1024;
  Id fapl(H5Pcreate(H5P_FILE_ACCESS));
  HT_CHECK(fapl.valid() && H5Pset_fapl_core(fapl, bytes, /*backing_store=*/0) >= 0,
           "cannot set up an in-memory HDF5 file: ", h5::last_error());
  Id file(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
  HT_CHECK(file.valid(), "cannot create an in-memory HDF5 file: ", h5::last_error());
  write_objects(file, name, info, t, entries);
  HT_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL) >= 0, "cannot flush the in-memory HDF5 file: ", h5::last_error());
  const ssize_t size = H5Fget_file_image(file, nullptr, 0);
  HT_CHECK(size > 0, "cannot size the in-memory HDF5 file: ", h5::last_error());
  std::vector<char> image(static_cast<size_t>(size));
  HT_CHECK(H5Fget_file_image(file, image.data(), image.size()) == size, "cannot copy the in-memory HDF5 file: ",
           h5::last_error());
  return image;
}

}  // namespace

void write_checkpoint(const std::string& path, const CheckpointInfo& info, const nn::ParamBuffer& layout,
                      const CheckpointTensors& t) {
  HT_CHECK(int64_t(t.values.size()) == layout.count() && int64_t(t.momentum.size()) == layout.count() &&
               int64_t(t.states.size()) == layout.state_count(),
           "internal: checkpoint tensors do not match the model");
  HT_CHECK(!t.has_ema() || (int64_t(t.ema_values.size()) == layout.count() &&
                            int64_t(t.ema_states.size()) == layout.state_count()),
           "internal: the checkpoint's weight average does not match the model");
  HT_CHECK(!t.has_powersgd() || int64_t(t.powersgd_error.size()) == t.powersgd_rows * layout.count(),
           "internal: the checkpoint's PowerSGD error does not match the model");
  const std::vector<TensorEntry> entries = tensor_entries(layout, t, nullptr);
  // No checkpoint holds a non-finite number (docs/checkpoint-format.md): the newest one stays the last good.
  const std::string bad = first_nonfinite(entries, false);
  HT_CHECK(bad.empty(), "refusing to write the checkpoint ", path, ": its tensor ", bad,
           "; the newest checkpoint in its folder is the last one with finite values");
  std::vector<char> image;
  {
    std::lock_guard<std::mutex> lock(data::hdf5_mutex());  // the prefetcher reads HDF5 meanwhile
    h5::quiet();
    image = file_image(path, info, t, entries);
  }
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  HT_CHECK(fd >= 0, "cannot create ", tmp, ": ", std::strerror(errno));
  size_t done = 0;
  int err = 0;
  while (done < image.size() && err == 0) {
    const ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n > 0) done += size_t(n);
    else if (n < 0 && errno != EINTR) err = errno;
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    HT_THROW("cannot write ", path, ": ", std::strerror(err));
  }
  fsync_path(folder_of(path), true);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  std::lock_guard<std::mutex> lock(data::hdf5_mutex());
  Id file = open_checkpoint(path);
  CheckpointInfo c;
  c.model = h5::read_string_attr(file, "model", path);
  c.input_shape = h5::read_int_array_attr(file, "input_shape", path);
  HT_CHECK(c.input_shape.size() == 3, path, ": input_shape should hold C, H, W");
  c.num_classes = int(h5::read_int_attr(file, "num_classes", path));
  c.global_step = h5::read_int_attr(file, "global_step", path);
  c.epoch = h5::read_int_attr(file, "epoch", path);
  c.step_in_epoch = h5::read_int_attr(file, "step_in_epoch", path);
  c.samples_in_epoch = h5::read_int_attr(file, "samples_in_epoch", path);
  if (h5::has_attr(file, "sample_position")) c.sample_position = h5::read_int_attr(file, "sample_position", path);
  c.steps_per_epoch = h5::read_int_attr(file, "steps_per_epoch", path);
  c.global_batch = h5::read_int_attr(file, "global_batch", path);
  c.num_samples = h5::read_int_attr(file, "num_samples", path);
  c.seed = read_u64_attr(file, "seed", path);
  c.world_size = int(h5::read_int_attr(file, "world_size", path));
  HT_CHECK(c.global_step >= 0 && c.global_batch >= 1 && c.steps_per_epoch >= 1 && c.num_samples >= 1 &&
               c.sample_position >= -1,
           path, ": inconsistent progress attributes");

  HT_CHECK(H5Lexists(file, "optimizer", H5P_DEFAULT) > 0 && H5Lexists(file, "schedule", H5P_DEFAULT) > 0 &&
               H5Lexists(file, "balancer", H5P_DEFAULT) > 0,
           path, ": incomplete checkpoint (a group is missing)");
  Id opt(H5Gopen2(file, "optimizer", H5P_DEFAULT));
  c.sgd.momentum = float(read_float_attr(opt, "momentum", path));
  c.sgd.nesterov = h5::read_int_attr(opt, "nesterov", path) != 0;
  c.sgd.weight_decay = float(read_float_attr(opt, "weight_decay", path));
  c.sgd.decay_bn_and_bias = h5::read_int_attr(opt, "decay_bn_and_bias", path) != 0;
  if (h5::has_attr(opt, "loss_scale")) {  // fp16 runs only
    c.loss_scale = read_float_attr(opt, "loss_scale", path);
    c.loss_scale_good_steps = h5::read_int_attr(opt, "loss_scale_good_steps", path);
  }
  Id sched(H5Gopen2(file, "schedule", H5P_DEFAULT));
  c.schedule.base_lr = float(read_float_attr(sched, "base_lr", path));
  c.peak_lr = float(read_float_attr(sched, "peak_lr", path));
  c.schedule.linear_scaling = h5::read_int_attr(sched, "linear_scaling", path) != 0;
  c.schedule.warmup_steps = h5::read_int_attr(sched, "warmup_steps", path);
  if (h5::has_attr(sched, "warmup_bias_lr")) {  // absent from the checkpoints of earlier versions
    c.schedule.warmup_bias_lr = float(read_float_attr(sched, "warmup_bias_lr", path));
    c.schedule.warmup_momentum = float(read_float_attr(sched, "warmup_momentum", path));
  }
  c.total_steps = h5::read_int_attr(sched, "total_steps", path);
  c.schedule.decay = h5::read_string_attr(sched, "decay", path);
  c.schedule.milestones = read_array<int64_t>(sched, "milestones", H5T_NATIVE_INT64, path);
  c.schedule.gamma = float(read_float_attr(sched, "gamma", path));
  {
    HT_CHECK(H5Lexists(file, "config", H5P_DEFAULT) > 0, path, ": missing dataset '/config'");
    Id d(H5Dopen2(file, "config", H5P_DEFAULT));
    Id type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type, H5T_VARIABLE);
    char* text = nullptr;
    HT_CHECK(d.valid() && H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) >= 0, path,
             ": cannot read /config: ", h5::last_error());
    c.config_text = text ? text : "";
    Id space(H5Dget_space(d));
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, &text);
  }
  Id bal(H5Gopen2(file, "balancer", H5P_DEFAULT));
  c.split = read_array<int64_t>(bal, "split", H5T_NATIVE_INT64, path);
  c.alpha = read_array<double>(bal, "alpha", H5T_NATIVE_DOUBLE, path);
  c.beta = read_array<double>(bal, "beta", H5T_NATIVE_DOUBLE, path);
  return c;
}

CheckpointTensors read_checkpoint_tensors(const std::string& path, const nn::ParamBuffer& layout) {
  CheckpointTensors t;
  t.values.resize(size_t(layout.count()));
  t.momentum.resize(size_t(layout.count()));
  t.states.resize(size_t(layout.state_count()));
  std::lock_guard<std::mutex> lock(data::hdf5_mutex());
  Id file = open_checkpoint(path);
  if (H5Lexists(file, "ema", H5P_DEFAULT) > 0) {  // a --ema-decay run's
    t.ema_values.resize(size_t(layout.count()));
    t.ema_states.resize(size_t(layout.state_count()));
    Id ema(H5Gopen2(file, "ema", H5P_DEFAULT));
    t.ema_updates = h5::read_int_attr(ema, "updates", path);
  }
  if (H5Lexists(file, "powersgd", H5P_DEFAULT) > 0) {  // a --compress powersgd:R run's
    Id psgd(H5Gopen2(file, "powersgd", H5P_DEFAULT));
    t.powersgd_rank = h5::read_int_attr(psgd, "rank", path);
    // The sizes come from the datasets; read_tensor then checks their shapes and types like any other.
    auto dims_of = [&](const char* name, int ndims) {
      HT_CHECK(H5Lexists(psgd, name, H5P_DEFAULT) > 0, path, ": missing dataset '/powersgd/", name, "'");
      Id d(H5Dopen2(psgd, name, H5P_DEFAULT));
      Id space(d.valid() ? H5Dget_space(d) : -1);
      HT_CHECK(space.valid() && H5Sget_simple_extent_ndims(space) == ndims, path, ": /powersgd/", name, " is not ",
               ndims, "-dimensional");
      std::vector<hsize_t> dims(static_cast<size_t>(ndims));
      H5Sget_simple_extent_dims(space, dims.data(), nullptr);
      return dims;
    };
    t.powersgd_q.resize(size_t(dims_of("q", 1)[0]));
    t.powersgd_rows = int64_t(dims_of("error", 2)[0]);
    HT_CHECK(t.powersgd_rows >= 1, path, ": /powersgd/error has no rows");
    t.powersgd_error.resize(size_t(t.powersgd_rows * layout.count()));
  }
  const std::vector<TensorEntry> entries = tensor_entries(layout, t, &t);
  for (const TensorEntry& e : entries) read_tensor(file, e, path);
  const uint64_t stored = read_u64_attr(file, "checksum_crc32", path);
  const uint32_t computed = checksum(entries, true);
  HT_CHECK(stored == computed, path, ": checksum mismatch (stored ", stored, ", computed ", computed,
           "): the tensors were changed or damaged after writing");
  const std::string bad = first_nonfinite(entries, true);
  HT_CHECK(bad.empty(), path, ": its tensor ", bad, ": refusing to load non-finite weights");
  return t;
}

std::string checkpoint_path(const std::string& dir, int64_t global_step) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%08lld%s", kPrefix, (long long)global_step, kSuffix);
  return (dir.empty() ? std::string(".") : dir) + "/" + name;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  for (const std::string& name : folder_entries(dir)) {
    const int64_t step = step_of(name);
    if (step >= 0) found.push_back({step, dir + "/" + name});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

int64_t checkpoint_step(const std::string& path) {
  const size_t slash = path.rfind('/');
  return step_of(slash == std::string::npos ? path : path.substr(slash + 1));
}

std::vector<std::string> prune_checkpoints(std::vector<std::string>& prunable, int keep) {
  std::sort(prunable.begin(), prunable.end(),
            [](const std::string& a, const std::string& b) { return checkpoint_step(a) > checkpoint_step(b); });
  prunable.erase(std::unique(prunable.begin(), prunable.end()), prunable.end());
  std::vector<std::string> removed;
  while (prunable.size() > size_t(std::max(keep, 0))) {
    if (std::remove(prunable.back().c_str()) == 0) removed.push_back(prunable.back());
    prunable.pop_back();
  }
  return removed;
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  for (const std::string& name : folder_entries(dir)) {
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || step_of(name.substr(0, at)) < 0) continue;
    const std::string pid_text = name.substr(at + 5);
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(pid_text);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) {
      const std::string path = dir + "/" + name;
      if (std::remove(path.c_str()) == 0) removed.push_back(path);
    }
  }
  return removed;
}

void check_writable_folder(const std::string& dir, const char* option) {
  HT_CHECK(!dir.empty(), option, ": empty folder name");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    HT_CHECK(errno == ENOENT, option, " ", dir, ": ", std::strerror(errno));
    HT_CHECK(::mkdir(dir.c_str(), 0777) == 0 || errno == EEXIST, option, " ", dir, ": cannot create the folder: ",
             std::strerror(errno));
    HT_CHECK(::stat(dir.c_str(), &st) == 0, option, " ", dir, ": ", std::strerror(errno));
  }
  HT_CHECK(S_ISDIR(st.st_mode), option, " ", dir, ": not a folder");
  const std::string probe = dir + "/.hetrain-write-test-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  HT_CHECK(fd >= 0, option, " ", dir, ": cannot write in the folder: ", std::strerror(errno));
  const bool wrote = ::write(fd, "x", 1) == 1;
  const int err = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  HT_CHECK(wrote, option, " ", dir, ": cannot write in the folder: ", std::strerror(err));
}

}  // namespace hetrain::train
