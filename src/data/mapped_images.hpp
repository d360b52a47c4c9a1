// data/mapped_images.hpp — a read-only memory map of a shard file's /images bytes, for the common case of
// uncompressed, unfiltered uint8 data whose chunks hold whole samples (what the writer produces without
// --gzip). Reading a sample is then a memcpy from the page cache instead of an H5Dread: HDF5 reads a whole
// chunk into its chunk cache per call, which for random 28×28 samples in 64 KiB chunks moves ~80× the
// bytes asked for, and costs tens of µs of per-call overhead even for one large contiguous sample.
//
// HDF5 still owns the format: chunk file addresses come from H5Dget_chunk_info_by_coord (looked up lazily,
// once per chunk, under the HDF5 mutex) and the map is only used when every check passes; anything else
// (compression, filters, a user block, unallocated chunks) falls back to H5Dread.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hetrain::data {

class MappedImages {
 public:
  // nullptr when the layout does not allow direct reads or the file cannot be mapped (not an error).
  // Caller holds the HDF5 mutex. `images` is the open /images dataset of `file` ([count, C, H, W] uint8).
  static std::unique_ptr<MappedImages> open(const std::string& path, hid_t file, hid_t images, int64_t count,
                                            int64_t sample_bytes);
  ~MappedImages();
  MappedImages(const MappedImages&) = delete;
  MappedImages& operator=(const MappedImages&) = delete;

  // Whether sample i's chunk address is known (then sample() may be called without the HDF5 mutex).
  bool resolved(int64_t i) const { return chunk_off_[i / chunk_n_] >= 0; }
  // Looks up the chunk of sample i. Caller holds the HDF5 mutex. false: the chunk is not directly readable.
  bool resolve(int64_t i);
  // File offset of sample i; requires resolved(i).
  int64_t offset(int64_t i) const { return chunk_off_[i / chunk_n_] + (i % chunk_n_) * sample_bytes_; }
  // Copies `count` samples stored back to back from file offset `off` to dst: a memcpy from the map for
  // small samples, a pread for large ones (a fresh map pays a page fault per 4 KiB on first touch, which
  // costs more than the copy when each byte is read once an epoch; small random samples would cost a
  // syscall each with pread). Throws hetrain::Error on an I/O error. Thread-compatible, no HDF5 calls.
  void copy(int64_t off, int64_t count, uint8_t* dst) const;

 private:
  MappedImages() = default;
  static constexpr int64_t kUnknown = -1, kUnusable = -2;
  hid_t images_ = -1;  // not owned
  int fd_ = -1;
  bool use_map_ = true;
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t length_ = 0;
  int64_t count_ = 0, sample_bytes_ = 0, chunk_n_ = 1;
  std::vector<int64_t> chunk_off_;  // file offset of each chunk, kUnknown or kUnusable
};

}  // namespace hetrain::data
