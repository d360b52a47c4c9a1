// MappedImages: see data/mapped_images.hpp for why and when.
#include "data/mapped_images.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "data/h5util.hpp"
#include "hetrain/error.hpp"

namespace hetrain::data {
namespace {
// Samples below this size are copied from a memory map, larger ones with pread (see copy()).
constexpr int64_t kMapBelowBytes = 16 * 1024;

// SIGBUS guard for copies from a map. A thread points t_bus_guard at a jump buffer while it copies; a SIGBUS
// on that thread jumps back there. Any other SIGBUS goes to the disposition found when the handler was
// installed (e.g. the MPI library's backtrace handler, or the default: the process dies as it would have).
// volatile: the stores around the guarded code must happen in program order (a signal handler reads them).
thread_local sigjmp_buf* volatile t_bus_guard = nullptr;
struct sigaction g_previous_bus;

void on_sigbus(int sig, siginfo_t* info, void*) {
  if (sigjmp_buf* guard = t_bus_guard) siglongjmp(*guard, 1);
  // Not ours: hand the signal to the previous disposition. A fault re-executes the faulting access once the
  // handler returns and faults again, now into that disposition; a SIGBUS sent by kill() is raised again.
  sigaction(SIGBUS, &g_previous_bus, nullptr);
  if (!info || info->si_code <= 0) raise(sig);
}

// Installs on_sigbus unless it is the current SIGBUS handler. Caller holds the HDF5 mutex (serialises
// installs); called whenever a map is made, so a handler installed later by someone else is chained too.
void install_sigbus_guard() {
  struct sigaction current;
  if (sigaction(SIGBUS, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigbus) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous_bus);
}

off_t current_size(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 ? st.st_size : -1;
}
}  // namespace

FileWatch::FileWatch(const std::string& path, int fd) : path_(path), fd_(fd) {
  struct stat st;
  if ((fd >= 0 ? ::fstat(fd, &st) : ::stat(path.c_str(), &st)) != 0) return;
  active_ = true;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  size_ = st.st_size;
  mtime_s_ = long(st.st_mtim.tv_sec);
  mtime_ns_ = long(st.st_mtim.tv_nsec);
}

bool FileWatch::changed() const {
  struct stat st;
  if (!active_ || (fd_ >= 0 ? ::fstat(fd_, &st) : ::stat(path_.c_str(), &st)) != 0) return false;
  if (fd_ < 0 && (st.st_dev != dev_ || st.st_ino != ino_)) return false;
  return st.st_size != size_ || long(st.st_mtim.tv_sec) != mtime_s_ || long(st.st_mtim.tv_nsec) != mtime_ns_;
}

void FileWatch::check() const {
  if (!active_) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_check_ns_ < 10'000'000) return;
  last_check_ns_ = now;
  struct stat st;
  if ((fd_ >= 0 ? ::fstat(fd_, &st) : ::stat(path_.c_str(), &st)) != 0) return;  // gone by name: not ours now
  if (fd_ < 0 && (st.st_dev != dev_ || st.st_ino != ino_)) return;                 // replaced by another file
  HT_CHECK(st.st_size == size_, path_, ": changed or truncated while reading (size was ", size_, " bytes, now ",
           st.st_size, "): the dataset file must not be modified while it is in use");
  HT_CHECK(long(st.st_mtim.tv_sec) == mtime_s_ && long(st.st_mtim.tv_nsec) == mtime_ns_, path_,
           ": changed or truncated while reading (modified since it was opened): the dataset file must not be "
           "modified while it is in use");
}

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
  m->watch_ = FileWatch(path, fd);
  if (m->use_map_) {
    void* p = ::mmap(nullptr, m->length_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nullptr;  // the destructor closes fd
    m->base_ = static_cast<const uint8_t*>(p);
    install_sigbus_guard();
  }
  if (layout == H5D_CONTIGUOUS && size_t(m->chunk_off_[0]) + size_t(count * sample_bytes) > m->length_)
    return nullptr;  // the destructor unmaps
  return m;
}

bool MappedImages::run_guarded(void (*body)(void*), void* arg) {
  sigjmp_buf jump;
  sigjmp_buf* const outer = t_bus_guard;  // guards nest: a fault goes to the innermost
  // 0: no signal mask saved (saving it costs a system call; with a guard per sample, random reads of small
  // samples ran at half speed). The handler runs with SA_NODEFER, so SIGBUS is not left blocked after the
  // jump; unblock it anyway.
  if (sigsetjmp(jump, 0) != 0) {
    t_bus_guard = outer;
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    pthread_sigmask(SIG_UNBLOCK, &bus, nullptr);
    return false;
  }
  t_bus_guard = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  try {
    body(arg);
  } catch (...) {
    t_bus_guard = outer;
    throw;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_bus_guard = outer;
  return true;
}

void MappedImages::throw_past_end(int64_t off, int64_t count) const {
  const off_t now = current_size(fd_);
  // Unchanged and still long enough: the map faulted for another reason (a disk error while paging in).
  HT_CHECK(now < off + count * sample_bytes_ || watch_.changed(), path_, ": I/O error reading ",
           count * sample_bytes_, " bytes at offset ", off, " through its memory map (SIGBUS)");
  HT_THROW(path_, ": changed or truncated while reading (", count * sample_bytes_, " bytes at offset ", off,
           " are past its end, now ", now, " bytes): the dataset file must not be modified while it is in use");
}

MappedImages::~MappedImages() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), length_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedImages::copy(int64_t off, int64_t count, uint8_t* dst) const {
  if (base_) {
    if (!guard([&] { copy_in_guard(off, count, dst); })) throw_past_end(off, count);
    return;
  }
  copy_in_guard(off, count, dst);
}

void MappedImages::copy_in_guard(int64_t off, int64_t count, uint8_t* dst) const {
  size_t want = size_t(count * sample_bytes_);
  if (base_) {
    std::memcpy(dst, base_ + off, want);
    return;
  }
  const int64_t first = off;
  while (want > 0) {
    ssize_t got = ::pread(fd_, dst, want, off_t(off));
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) throw_past_end(first, count);
    HT_CHECK(got > 0, path_, ": cannot read ", want, " bytes at offset ", off, ": ", std::strerror(errno));
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
