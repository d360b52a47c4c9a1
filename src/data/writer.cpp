#include "data/writer.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>

#include "hetrain/data.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {

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
  HT_CHECK(meta.channels > 0 && meta.height > 0 && meta.width > 0, path, ": bad image shape ", meta.channels, "x",
           meta.height, "x", meta.width);
  HT_CHECK(meta.num_classes > 0, path, ": number of classes must be positive");
  HT_CHECK(opt.gzip_level >= 0 && opt.gzip_level <= 9, "compression level must be 0..9, got ", opt.gzip_level);
  sum_.assign(meta.channels, 0.0);
  sumsq_.assign(meta.channels, 0.0);
  hist_.assign(meta.num_classes, 0);

  std::lock_guard<std::mutex> lock(hdf5_mutex());
  h5::quiet();
  file_ = h5::Id(H5Fcreate(tmp_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  HT_CHECK(file_.valid(), tmp_, ": cannot create file: ", h5::last_error());

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

  hsize_t ldim = n, lchunk = std::min<hsize_t>(n, 16384);
  h5::Id lspace(H5Screate_simple(1, &ldim, nullptr));
  h5::Id lpl(H5Pcreate(H5P_DATASET_CREATE));
  H5Pset_chunk(lpl, 1, &lchunk);
  if (opt.gzip_level > 0) H5Pset_deflate(lpl, opt.gzip_level);
  labels_ = h5::Id(H5Dcreate2(file_, "labels", H5T_STD_I32LE, lspace, H5P_DEFAULT, lpl, H5P_DEFAULT));
  HT_CHECK(labels_.valid(), tmp_, ": cannot create /labels: ", h5::last_error());
}

FileWriter::~FileWriter() {
  if (committed_) return;
  {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    labels_.reset();
    images_.reset();
    file_.reset();
  }
  std::remove(tmp_.c_str());
}

void FileWriter::append(const uint8_t* images, const int32_t* labels, int64_t count) {
  HT_CHECK(!finished_ && written_ + count <= n_, path_, ": more samples appended than the ", n_, " announced");
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
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  hsize_t start[4] = {hsize_t(written_), 0, 0, 0};
  hsize_t cnt[4] = {hsize_t(count), hsize_t(C), hsize_t(meta_.height), hsize_t(meta_.width)};
  h5::Id fspace(H5Dget_space(images_));
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, cnt, nullptr);
  h5::Id mspace(H5Screate_simple(4, cnt, nullptr));
  HT_CHECK(H5Dwrite(images_, H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, images) >= 0, tmp_,
           ": cannot write images: ", h5::last_error());
  h5::Id lfspace(H5Dget_space(labels_));
  H5Sselect_hyperslab(lfspace, H5S_SELECT_SET, start, nullptr, cnt, nullptr);
  h5::Id lmspace(H5Screate_simple(1, cnt, nullptr));
  HT_CHECK(H5Dwrite(labels_, H5T_NATIVE_INT32, lmspace, lfspace, H5P_DEFAULT, labels) >= 0, tmp_,
           ": cannot write labels: ", h5::last_error());
  written_ += count;
}

void write_common_attrs(hid_t file, const DatasetMeta& meta, int64_t num_samples, const std::vector<float>& mean,
                        const std::vector<float>& std, const std::string& layout) {
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
}

void FileWriter::finish(const std::vector<float>& mean, const std::vector<float>& std, int shard_index,
                        int shard_count) {
  HT_CHECK(written_ == n_, path_, ": ", written_, " samples written, ", n_, " announced");
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  write_common_attrs(file_, meta_, n_, mean, std, shard_index < 0 ? "single" : "shard");
  if (shard_index >= 0) {
    h5::write_int_attr(file_, "shard_index", shard_index);
    h5::write_int_attr(file_, "shard_count", shard_count);
  }
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
}

void write_index(const std::string& path, const DatasetMeta& meta, const std::vector<std::string>& shard_files,
                 const std::vector<int64_t>& shard_counts, const std::vector<float>& mean,
                 const std::vector<float>& std) {
  std::string tmp = temp_name_for(path);
  int64_t total = 0;
  for (int64_t c : shard_counts) total += c;
  try {
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    h5::quiet();
    h5::Id file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(file.valid(), tmp, ": cannot create file: ", h5::last_error());
    write_common_attrs(file, meta, total, mean, std, "index");
    h5::Id group(H5Gcreate2(file, "shards", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    h5::write_string_dataset(group, "files", shard_files);
    hsize_t n = shard_counts.size();
    h5::Id space(H5Screate_simple(1, &n, nullptr));
    h5::Id d(H5Dcreate2(group, "counts", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    HT_CHECK(d.valid() && H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, shard_counts.data()) >= 0,
             tmp, ": cannot write /shards/counts");
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  HT_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename ", tmp, " to ", path);
}

}  // namespace hetrain::data
