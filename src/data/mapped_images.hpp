// data/mapped_images.hpp — a read-only memory map of a shard file's /images bytes, for the common case of
// uncompressed, unfiltered uint8 data whose chunks hold whole samples (what the writer produces without
// --gzip). Reading a sample is then a memcpy from the page cache instead of an H5Dread: HDF5 reads a whole
// chunk into its chunk cache per call, which for random 28×28 samples in 64 KiB chunks moves ~80× the
// bytes asked for, and costs tens of µs of per-call overhead even for one large contiguous sample.
//
// HDF5 still owns the format: chunk file addresses come from H5Dget_chunk_info_by_coord (looked up lazily,
// once per chunk, under the HDF5 mutex) and the map is only used when every check passes; anything else
// (compression, filters, a user block, unallocated chunks) falls back to H5Dread.
//
// A file that shrinks under a map faults (SIGBUS) on the next access past its new end. Copies from the map
// run under a per-thread guard: a SIGBUS inside one becomes a hetrain::Error "<file>: changed or truncated
// while reading" instead of a crash. FileWatch then catches what does not fault (a file overwritten in
// place, a truncation that spared the bytes just read): after each read the file's size and modification
// time must still be those seen at open. Deleting (unlinking) the file is harmless: the open descriptor and
// the map keep the old contents.
#pragma once

#include <hdf5.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace hetrain::data {

// Size and modification time of a file, seen at open, checked later. With fd >= 0 it checks that file
// (whatever its name now points to); otherwise it stats the path and checks only while the path still names
// the same file (a file deleted or replaced by a rename is not the one being read, and is left alone).
class FileWatch {
 public:
  FileWatch() = default;
  FileWatch(const std::string& path, int fd);  // no-op watch when the file cannot be stat'ed
  // Throws hetrain::Error "<path>: changed or truncated while reading (...)" when size or mtime differ.
  // At most one stat per 10 ms (a stat per batch of small samples cost 5% of the reader's speed): a change
  // is reported within 10 ms of reading, not necessarily at the first batch after it.
  void check() const;
  bool changed() const;  // the same comparison, now, unthrottled, without throwing
  bool active() const { return active_; }

 private:
  std::string path_;
  int fd_ = -1;  // not owned
  bool active_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  off_t size_ = 0;
  long mtime_s_ = 0, mtime_ns_ = 0;
  mutable int64_t last_check_ns_ = 0;  // steady clock
};

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
  // syscall each with pread). Throws hetrain::Error on an I/O error, and "<file>: changed or truncated while
  // reading" when the bytes are past the end of the file (a map access there faults; the fault is caught).
  // Thread-compatible, no HDF5 calls.
  void copy(int64_t off, int64_t count, uint8_t* dst) const;
  // Batch form: many copies under one guard (entering a guard costs about as much as a small copy).
  //   bool ok = MappedImages::guard([&] { ... m.copy_in_guard(off, count, dst) ... });
  // guard() runs body and returns false when a copy from a map inside it faulted (a file shrank): body is
  // abandoned at the fault, so it must hold no objects with destructors there (exceptions pass through).
  // Then throw_past_end() of the map concerned gives the error. copy_in_guard() outside a guard turns a
  // fault into a crash; its pread path (large samples) reports a short read itself.
  template <typename F>
  static bool guard(F&& body) {
    return run_guarded([](void* f) { (*static_cast<std::remove_reference_t<F>*>(f))(); }, &body);
  }
  void copy_in_guard(int64_t off, int64_t count, uint8_t* dst) const;
  [[noreturn]] void throw_past_end(int64_t off, int64_t count) const;
  // FileWatch::check() of the file (size and mtime as at open). Call after copies to validate them.
  void check_unchanged() const { watch_.check(); }

 private:
  MappedImages() = default;
  static bool run_guarded(void (*body)(void*), void* arg);
  static constexpr int64_t kUnknown = -1, kUnusable = -2;
  hid_t images_ = -1;  // not owned
  int fd_ = -1;
  bool use_map_ = true;
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t length_ = 0;
  int64_t count_ = 0, sample_bytes_ = 0, chunk_n_ = 1;
  std::vector<int64_t> chunk_off_;  // file offset of each chunk, kUnknown or kUnusable
  FileWatch watch_;
};

}  // namespace hetrain::data
