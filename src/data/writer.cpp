#include "data/writer.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>

#include "data/boxes.hpp"
#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

namespace {
// The registry of live temporary files, readable from a signal handler: fixed buffers and flags in static
// storage, no allocation, no locks on the reading side. Slots are taken and released under g_temp_mu.
constexpr int kTempSlots = 512;
constexpr size_t kTempPathMax = 4096;
char g_temp_path[kTempSlots][kTempPathMax];
volatile sig_atomic_t g_temp_used[kTempSlots];
std::mutex g_temp_mu;

// Returns the slot, or -1 when the registry is full or the path too long (the file is then only removed by
// a later stale-temporary sweep).
int register_temp(const std::string& path) {
  if (path.size() >= kTempPathMax) return -1;
  std::lock_guard<std::mutex> lock(g_temp_mu);
  for (int i = 0; i < kTempSlots; ++i) {
    if (g_temp_used[i]) continue;
    std::memcpy(g_temp_path[i], path.c_str(), path.size() + 1);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the path is complete before the flag says so
    g_temp_used[i] = 1;
    return i;
  }
  return -1;
}

void release_temp(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_temp_mu);
  g_temp_used[slot] = 0;
}

// Async-signal-safe: unlink, signal, raise only.
extern "C" void remove_temps_and_reraise(int sig) {
  for (int i = 0; i < kTempSlots; ++i)
    if (g_temp_used[i]) ::unlink(g_temp_path[i]);
  ::signal(sig, SIG_DFL);
  ::raise(sig);  // blocked while this handler runs; delivered with the default action when it returns
}
}  // namespace

void remove_temporaries_on_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = remove_temps_and_reraise;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, sig);  // one cleanup at a time
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    // A signal ignored at start stays ignored (e.g. SIGINT of a background job, SIGHUP under nohup).
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(sig, &sa, nullptr);
  }
}

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string temp_name_for(const std::string& path) { return path + ".tmp-" + std::to_string(getpid()); }

int64_t auto_chunk_samples(int64_t sample_bytes) {
  // ~64 KiB chunks: one 224×224×3 image per chunk, 83 MNIST images per chunk. A single-sample read then
  // costs at most one small chunk, and consecutive runs read whole chunks.
  int64_t k = (64 * 1024) / std::max<int64_t>(1, sample_bytes);
  return std::max<int64_t>(1, k);
}

FileWriter::FileWriter(const std::string& path, int64_t n, const DatasetMeta& meta, const WriteOptions& opt)
    : path_(path), tmp_(temp_name_for(path)), meta_(meta), n_(n) {
  HT_CHECK(n > 0, path, ": refusing to write an empty dataset (0 samples)");
  check_sample_shape(path, meta.channels, meta.height, meta.width);
  HT_CHECK(meta.num_classes > 0, path, ": number of classes must be positive");
  HT_CHECK(opt.gzip_level >= 0 && opt.gzip_level <= 9, "compression level must be 0..9, got ", opt.gzip_level);
  sum_.assign(meta.channels, 0.0);
  sumsq_.assign(meta.channels, 0.0);
  hist_.assign(meta.num_classes, 0);

  std::lock_guard<std::mutex> lock(hdf5_mutex());
  h5::quiet();
  temp_slot_ = register_temp(tmp_);  // before the file exists, so a signal never misses it
  file_ = h5::Id(H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  if (!file_.valid()) {  // the destructor does not run when the constructor throws
    const std::string why = h5::last_error();
    std::remove(tmp_.c_str());  // H5Fcreate may have made the file before failing (a full disk)
    release_temp(temp_slot_);
    HT_THROW(tmp_, ": cannot create file: ", why);
  }

  if (meta.jpeg) {
    create_jpeg();
  } else {
    const int64_t sample_bytes = int64_t(meta.channels) * meta.height * meta.width;
    hsize_t chunk_n = std::min<int64_t>(n, opt.chunk_samples > 0 ? opt.chunk_samples : auto_chunk_samples(sample_bytes));
    hsize_t dims[4] = {hsize_t(n), hsize_t(meta.channels), hsize_t(meta.height), hsize_t(meta.width)};
    hsize_t chunk[4] = {chunk_n, dims[1], dims[2], dims[3]};
    h5::Id space(H5Screate_simple(4, dims, nullptr));
    h5::Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(dcpl, 4, chunk);
    if (opt.gzip_level > 0) {
      H5Pset_shuffle(dcpl);  // no effect on uint8 pixels but harmless; helps if the type ever widens
      H5Pset_deflate(dcpl, opt.gzip_level);
    }
    images_ = h5::Id(H5Dcreate2(file_, "images", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    HT_CHECK(images_.valid(), tmp_, ": cannot create /images: ", h5::last_error());
  }

  hsize_t ldim = n, lchunk = std::min<hsize_t>(n, 16384);
  h5::Id lspace(H5Screate_simple(1, &ldim, nullptr));
  h5::Id lpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(lpl, 1, &lchunk);
  if (opt.gzip_level > 0) H5Pset_deflate(lpl, opt.gzip_level);
  labels_ = h5::Id(H5Dcreate2(file_, "labels", H5T_STD_I32LE, lspace, H5P_DEFAULT, lpl, H5P_DEFAULT));
  HT_CHECK(labels_.valid(), tmp_, ": cannot create /labels: ", h5::last_error());
  if (meta.has_boxes) create_boxes(opt);
}

// /boxes grows as samples are appended (their box count is not known in advance): extendible along M,
// chunks of 4096 boxes (80 KiB).
void FileWriter::create_boxes(const WriteOptions& opt) {
  hsize_t dims[2] = {0, hsize_t(kBoxFields)}, maxdims[2] = {H5S_UNLIMITED, hsize_t(kBoxFields)};
  hsize_t chunk[2] = {4096, hsize_t(kBoxFields)};
  h5::Id space(H5Screate_simple(2, dims, maxdims));
  h5::Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl, 2, chunk);
  if (opt.gzip_level > 0) H5Pset_deflate(dcpl, opt.gzip_level);
  boxes_ = h5::Id(H5Dcreate2(file_, "boxes", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  HT_CHECK(boxes_.valid(), tmp_, ": cannot create /boxes: ", h5::last_error());
}

// /jpeg grows with every block of encoded samples (their sizes are not known in advance): extendible, chunks
// of 1 MiB, never compressed (JPEG bytes do not deflate).
void FileWriter::create_jpeg() {
  hsize_t dims = 0, maxdims = H5S_UNLIMITED, chunk = 1 << 20;
  h5::Id space(H5Screate_simple(1, &dims, &maxdims));
  h5::Id dcpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(dcpl, 1, &chunk);
  jpeg_ = h5::Id(H5Dcreate2(file_, "jpeg", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
  HT_CHECK(jpeg_.valid(), tmp_, ": cannot create /jpeg: ", h5::last_error());
}

void FileWriter::append_boxes(const BoxList& boxes, int64_t count) {
  const int64_t m = boxes.offsets[count] - boxes.offsets[0], at = box_offsets_.back();
  for (int64_t i = 0; i < count; ++i) box_offsets_.push_back(at + boxes.offsets[i + 1] - boxes.offsets[0]);
  if (m == 0) return;
  hsize_t size[2] = {hsize_t(at + m), hsize_t(kBoxFields)}, start[2] = {hsize_t(at), 0},
          cnt[2] = {hsize_t(m), hsize_t(kBoxFields)};
  HT_CHECK(H5Dset_extent(boxes_, size) >= 0, tmp_, ": cannot extend /boxes: ", h5::last_error());
  h5::Id fspace(H5Dget_space(boxes_));
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, cnt, nullptr);
  h5::Id mspace(H5Screate_simple(2, cnt, nullptr));
  HT_CHECK(H5Dwrite(boxes_, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, boxes.box(boxes.offsets[0])) >= 0, tmp_,
           ": cannot write boxes: ", h5::last_error());
}

FileWriter::~FileWriter() {
  if (committed_) return;
  // Emptied first: on a full disk the closes below still flush cached chunks and metadata, which then fit in
  // the space the file held, so every HDF5 object really closes (a close that fails leaves HDF5 1.10 objects
  // it crashes on later).
  if (::truncate(tmp_.c_str(), 0) != 0) {
    // nothing more to do: the file is removed below either way
  }
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    boxes_.reset();
    labels_.reset();
    images_.reset();
    jpeg_.reset();
    file_.reset();
  }
  std::remove(tmp_.c_str());
  release_temp(temp_slot_);
}

void FileWriter::append(const uint8_t* images, const int32_t* labels, int64_t count, const BoxList* boxes,
                        const SampleOrigin* origins) {
  HT_CHECK(!finished_ && written_ + count <= n_, path_, ": more samples appended than the ", n_, " announced");
  HT_CHECK(meta_.has_origins == (origins != nullptr), path_, ": image origins ",
           meta_.has_origins ? "missing" : "given for a dataset without them");
  if (origins) origins_.insert(origins_.end(), origins, origins + count);
  HT_CHECK(meta_.has_boxes == (boxes != nullptr), path_, meta_.has_boxes ? ": a detection dataset needs boxes"
                                                                         : ": boxes given for a classification dataset");
  HT_CHECK(!meta_.jpeg, path_, ": a JPEG dataset takes encoded samples (append_encoded)");
  account(images, labels, count);
  if (boxes) {  // checked before anything is written: a bad box leaves the file as it was
    HT_CHECK(boxes->samples() == count, path_, ": boxes of ", boxes->samples(), " samples appended with ", count,
             " images");
    for (int64_t i = 0; i < count; ++i)
      for (int64_t r = boxes->offsets[i]; r < boxes->offsets[i + 1]; ++r) {
        const std::string why = box_problem(boxes->box(r), meta_.num_classes);
        HT_CHECK(why.empty(), path_, ": sample ", written_ + i, ": box ", r - boxes->offsets[i], " ", why);
      }
  }
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  hsize_t start[4] = {hsize_t(written_), 0, 0, 0};
  hsize_t cnt[4] = {hsize_t(count), hsize_t(meta_.channels), hsize_t(meta_.height), hsize_t(meta_.width)};
  h5::Id fspace(H5Dget_space(images_));
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, cnt, nullptr);
  h5::Id mspace(H5Screate_simple(4, cnt, nullptr));
  HT_CHECK(H5Dwrite(images_, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, images) >= 0, tmp_,
           ": cannot write images: ", h5::last_error());
  write_labels(labels, count);
  if (boxes) append_boxes(*boxes, count);
  written_ += count;
}

void FileWriter::account(const uint8_t* images, const int32_t* labels, int64_t count) {
  const int C = meta_.channels;
  const int64_t plane = int64_t(meta_.height) * meta_.width;
  for (int64_t i = 0; i < count; ++i) {
    HT_CHECK(labels[i] >= 0 && labels[i] < meta_.num_classes, path_, ": sample ", written_ + i, ": label ",
             labels[i], " outside [0, ", meta_.num_classes, ")");
    ++hist_[labels[i]];
    for (int c = 0; c < C; ++c) {
      const uint8_t* p = images + (i * C + c) * plane;
      uint64_t s = 0, s2 = 0;  // exact integer sums per plane, then one conversion
      for (int64_t k = 0; k < plane; ++k) { s += p[k]; s2 += uint32_t(p[k]) * p[k]; }
      sum_[c] += double(s) / 255.0;
      sumsq_[c] += double(s2) / (255.0 * 255.0);
    }
  }
}

void FileWriter::write_labels(const int32_t* labels, int64_t count) {
  hsize_t start = hsize_t(written_), cnt = hsize_t(count);
  h5::Id lfspace(H5Dget_space(labels_));
  H5Sselect_hyperslab(lfspace, H5S_SELECT_SET, &start, nullptr, &cnt, nullptr);
  h5::Id lmspace(H5Screate_simple(1, &cnt, nullptr));
  HT_CHECK(H5Dwrite(labels_, H5T_NATIVE_INT32, lmspace, lfspace, H5P_DEFAULT, labels) >= 0, tmp_,
           ": cannot write labels: ", h5::last_error());
}

void FileWriter::append_encoded(const EncodedImages& encoded, const uint8_t* images, const int32_t* labels,
                                int64_t count) {
  HT_CHECK(meta_.jpeg, path_, ": encoded samples given for a dataset of raw pixels");
  HT_CHECK(!finished_ && written_ + count <= n_, path_, ": more samples appended than the ", n_, " announced");
  HT_CHECK(encoded.samples() == count, path_, ": ", encoded.samples(), " encoded samples appended with ", count,
           " labels");
  account(images, labels, count);
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  const hsize_t at = hsize_t(jpeg_offsets_.back()), bytes = hsize_t(encoded.offsets[size_t(count)]);
  if (bytes > 0) {
    const hsize_t size = at + bytes;
    HT_CHECK(H5Dset_extent(jpeg_, &size) >= 0, tmp_, ": cannot extend /jpeg: ", h5::last_error());
    h5::Id fspace(H5Dget_space(jpeg_));
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &at, nullptr, &bytes, nullptr);
    h5::Id mspace(H5Screate_simple(1, &bytes, nullptr));
    HT_CHECK(H5Dwrite(jpeg_, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, encoded.bytes.data()) >= 0, tmp_,
             ": cannot write JPEG bytes: ", h5::last_error());
  }
  for (int64_t i = 1; i <= count; ++i) jpeg_offsets_.push_back(int64_t(at) + encoded.offsets[size_t(i)]);
  write_labels(labels, count);
  written_ += count;
}

void write_common_attrs(hid_t file, const DatasetMeta& meta, int64_t num_samples, const std::vector<float>& mean,
                        const std::vector<float>& std, const std::string& layout, int64_t num_boxes) {
  h5::write_string_attr(file, "format", kFormatName);
  h5::write_int_attr(file, "version", kFormatVersion);
  h5::write_string_attr(file, "layout", layout);
  h5::write_int_attr(file, "num_samples", num_samples, H5T_STD_I64LE);
  h5::write_int_array_attr(file, "shape", {meta.channels, meta.height, meta.width});
  h5::write_int_attr(file, "num_classes", meta.num_classes);
  std::vector<std::string> names = meta.class_names;
  if (names.empty())
    for (int k = 0; k < meta.num_classes; ++k) names.push_back(std::to_string(k));
  h5::write_string_array_attr(file, "class_names", names);
  h5::write_float_array_attr(file, "mean", mean);
  h5::write_float_array_attr(file, "std", std);
  h5::write_string_attr(file, "source", meta.source);
  h5::write_string_attr(file, "created", iso_time_now() + " by hetrain-pack");
  if (meta.has_boxes) {
    h5::write_string_attr(file, "task", "detection");
    h5::write_int_attr(file, "num_boxes", num_boxes, H5T_STD_I64LE);
  }
  if (!meta.category_ids.empty()) h5::write_int_array_attr(file, "category_ids", meta.category_ids);
  if (meta.jpeg) h5::write_string_attr(file, "storage", "jpeg");
}

void FileWriter::finish(const std::vector<float>& mean, const std::vector<float>& std, int shard_index,
                        int shard_count) {
  HT_CHECK(written_ == n_, path_, ": ", written_, " samples written, ", n_, " announced");
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  write_common_attrs(file_, meta_, n_, mean, std, shard_index < 0 ? "single" : "shard", box_offsets_.back());
  if (meta_.has_boxes) {
    hsize_t n1 = hsize_t(box_offsets_.size());
    h5::Id space(H5Screate_simple(1, &n1, nullptr));
    h5::Id d(H5Dcreate2(file_, "box_offsets", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(d.valid() && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, box_offsets_.data()) >= 0,
             tmp_, ": cannot write /box_offsets: ", h5::last_error());
  }
  if (meta_.has_origins) {
    std::vector<int64_t> ids(origins_.size());
    std::vector<int32_t> sizes(2 * origins_.size());
    for (size_t i = 0; i < origins_.size(); ++i)
      ids[i] = origins_[i].image_id, sizes[2 * i] = origins_[i].width, sizes[2 * i + 1] = origins_[i].height;
    hsize_t dims[2] = {hsize_t(ids.size()), 2};
    h5::Id s1(H5Screate_simple(1, dims, nullptr)), s2(H5Screate_simple(2, dims, nullptr));
    h5::Id d1(H5Dcreate2(file_, "image_ids", H5T_STD_I64LE, s1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    h5::Id d2(H5Dcreate2(file_, "source_sizes", H5T_STD_I32LE, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(d1.valid() && d2.valid() && (ids.empty() || (H5Dwrite(d1, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()) >= 0 &&
                                                         H5Dwrite(d2, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, sizes.data()) >= 0)),
             tmp_, ": cannot write /image_ids and /source_sizes: ", h5::last_error());
  }
  if (meta_.jpeg) {
    hsize_t n1 = hsize_t(jpeg_offsets_.size());
    h5::Id space(H5Screate_simple(1, &n1, nullptr));
    h5::Id d(H5Dcreate2(file_, "jpeg_offsets", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(d.valid() && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, jpeg_offsets_.data()) >= 0,
             tmp_, ": cannot write /jpeg_offsets: ", h5::last_error());
  }
  if (shard_index >= 0) {
    h5::write_int_attr(file_, "shard_index", shard_index);
    h5::write_int_attr(file_, "shard_count", shard_count);
  }
  // Everything cached reaches the file while every dataset is still open: on a full disk this fails here,
  // with nothing closed yet, and the destructor empties the file before closing (see there).
  HT_CHECK(H5Fflush(file_, H5F_SCOPE_LOCAL) >= 0, tmp_, ": cannot write: ", h5::last_error());
  boxes_.reset();
  jpeg_.reset();
  labels_.reset();
  images_.reset();
  HT_CHECK(H5Fflush(file_, H5F_SCOPE_GLOBAL) >= 0, tmp_, ": cannot flush: ", h5::last_error());
  file_.reset();
  finished_ = true;
}

void FileWriter::commit() {
  HT_CHECK(finished_, path_, ": commit before finish");
  HT_CHECK(std::rename(tmp_.c_str(), path_.c_str()) == 0, "cannot rename ", tmp_, " to ", path_);
  committed_ = true;
  release_temp(temp_slot_);
}

void write_index(const std::string& path, const DatasetMeta& meta, const std::vector<std::string>& shard_files,
                 const std::vector<int64_t>& shard_counts, const std::vector<float>& mean,
                 const std::vector<float>& std, int64_t num_boxes) {
  std::string tmp = temp_name_for(path);
  int64_t total = 0;
  for (int64_t c : shard_counts) total += c;
  const int slot = register_temp(tmp);
  try {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    h5::quiet();
    h5::Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(file.valid(), tmp, ": cannot create file: ", h5::last_error());
    write_common_attrs(file, meta, total, mean, std, "index", num_boxes);
    h5::Id group(H5Gcreate2(file, "shards", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    h5::write_string_dataset(group, "files", shard_files);
    hsize_t n = shard_counts.size();
    h5::Id space(H5Screate_simple(1, &n, nullptr));
    h5::Id d(H5Dcreate2(group, "counts", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(d.valid() && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, shard_counts.data()) >= 0,
             tmp, ": cannot write /shards/counts");
  } catch (...) {
    std::remove(tmp.c_str());
    release_temp(slot);
    throw;
  }
  const bool renamed = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!renamed) std::remove(tmp.c_str());
  release_temp(slot);
  HT_CHECK(renamed, "cannot rename ", tmp, " to ", path);
}

}  // namespace hetrain::data
