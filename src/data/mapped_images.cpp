// MappedImages: see data/mapped_images.hpp for why and when.
#include "data/mapped_images.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "data/h5util.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
// Samples below this size are copied from a memory map, larger ones with pread (see copy()).
constexpr int64_t kMapBelowBytes = 16 * 1024;
}  // namespace

std::unique_ptr<MappedImages> MappedImages::open(const std::string& path, hid_t file, hid_t images, int64_t count,
                                                 int64_t sample_bytes) {
  if (count <= 0 || sample_bytes <= 0) return nullptr;
  // File addresses are relative to the base address, which is the file start only without a user block.
  h5::Id fcpl(H5Fget_create_plist(file));
  hsize_t userblock = 1;
  if (!fcpl.valid() || H5Pget_userblock(fcpl, &userblock) < 0 || userblock != 0) return nullptr;
  h5::Id dcpl(H5Dget_create_plist(images));
  if (!dcpl.valid() || H5Pget_nfilters(dcpl) != 0) return nullptr;  // compressed bytes: HDF5 must decode
  std::unique_ptr<MappedImages> m(new MappedImages());
  m->images_ = images;
  m->count_ = count;
  m->sample_bytes_ = sample_bytes;
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  if (layout == H5D_CHUNKED) {
    hsize_t chunk[4] = {0, 0, 0, 0};
    if (H5Pget_chunk(dcpl, 4, chunk) != 4) return nullptr;
    h5::Id sp(H5Dget_space(images));
    hsize_t d[4] = {0, 0, 0, 0};
    H5Sget_simple_extent_dims(sp, d, nullptr);
    // A chunk must hold whole samples, so that a sample's bytes are contiguous in it.
    if (chunk[0] == 0 || chunk[1] != d[1] || chunk[2] != d[2] || chunk[3] != d[3]) return nullptr;
    m->chunk_n_ = int64_t(chunk[0]);
    m->chunk_off_.assign((count + m->chunk_n_ - 1) / m->chunk_n_, kUnknown);
  } else if (layout == H5D_CONTIGUOUS) {
    haddr_t a = H5Dget_offset(images);
    if (a == HADDR_UNDEF) return nullptr;
    m->chunk_n_ = count;  // one "chunk": the whole array
    m->chunk_off_.assign(1, int64_t(a));
  } else {
    return nullptr;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return nullptr;
  }
  m->fd_ = fd;
  m->path_ = path;
  m->length_ = size_t(st.st_size);
  const char* io = std::getenv("HETRAIN_READER_IO");  // diagnostics: force "mmap" or "pread"
  m->use_map_ = io && std::string(io) == "mmap" ? true
              : io && std::string(io) == "pread" ? false
              : sample_bytes < kMapBelowBytes;
  if (m->use_map_) {
    void* p = ::mmap(nullptr, m->length_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nullptr;  // the destructor closes fd
    m->base_ = static_cast<const uint8_t*>(p);
  }
  if (layout == H5D_CONTIGUOUS && size_t(m->chunk_off_[0]) + size_t(count * sample_bytes) > m->length_)
    return nullptr;  // the destructor unmaps
  return m;
}

MappedImages::~MappedImages() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), length_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedImages::copy(int64_t off, int64_t count, uint8_t* dst) const {
  size_t want = size_t(count * sample_bytes_);
  if (base_) {
    std::memcpy(dst, base_ + off, want);
    return;
  }
  while (want > 0) {
    ssize_t got = ::pread(fd_, dst, want, off_t(off));
    if (got < 0 && errno == EINTR) continue;
    HT_CHECK(got > 0, path_, ": cannot read ", want, " bytes at offset ", off, ": ",
             got < 0 ? std::strerror(errno) : "unexpected end of file");
    dst += got;
    off += got;
    want -= size_t(got);
  }
}

bool MappedImages::resolve(int64_t i) {
  int64_t& off = chunk_off_[i / chunk_n_];
  if (off == kUnknown) {
    off = kUnusable;
    const int64_t first = (i / chunk_n_) * chunk_n_;
    hsize_t coord[4] = {hsize_t(first), 0, 0, 0};
    unsigned mask = 0;
    haddr_t addr = HADDR_UNDEF;
    hsize_t size = 0;
    // Unallocated chunks (fill values) come back as HADDR_UNDEF: left to H5Dread.
    if (H5Dget_chunk_info_by_coord(images_, coord, &mask, &addr, &size) >= 0 && addr != HADDR_UNDEF &&
        mask == 0 && size >= hsize_t(chunk_n_ * sample_bytes_) && addr + size <= length_)
      off = int64_t(addr);
    else
      H5Eclear2(H5E_DEFAULT);
  }
  return off >= 0;
}

}  // namespace hetrain::data
