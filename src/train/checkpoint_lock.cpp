#include "train/checkpoint_lock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "hetrain/error.hpp"

namespace hetrain::train {

namespace {
// What the file says about its holder, on one line and at most a few hundred bytes.
std::string holder_text(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string t(buf, n > 0 ? size_t(n) : 0);
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  for (char& c : t)
    if (c == '\n' || c == '\r') c = ' ';
  return t;
}
}  // namespace

CheckpointLock::CheckpointLock(const std::string& dir, std::string& taken_over) {
  const std::string path = dir + "/.hetrain.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  HT_CHECK(fd_ >= 0, "--checkpoint-dir ", dir, ": cannot open the lock file ", path, ": ", std::strerror(errno));
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd_, F_SETLK, &lock) != 0) {
    const int err = errno;
    const std::string holder = holder_text(fd_);
    ::close(fd_);
    fd_ = -1;
    HT_CHECK(err != EACCES && err != EAGAIN, "--checkpoint-dir ", dir, " is in use by another hetrain job (",
             holder.empty() ? "its host and pid are not recorded" : holder,
             "): give each job its own folder, or wait for that one to end");
    HT_THROW("--checkpoint-dir ", dir, ": cannot lock ", path, ": ", std::strerror(err),
             " (the file system must support fcntl locks)");
  }
  taken_over = holder_text(fd_);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  char when[64] = {};
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  const std::string me = "host " + std::string(host) + ", pid " + std::to_string(::getpid()) + ", since " + when + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != ssize_t(me.size())) {
    // The lock holds without the note; a refused job then cannot name this one, nothing worse.
  }
}

CheckpointLock::~CheckpointLock() {
  if (fd_ < 0) return;
  if (::ftruncate(fd_, 0) != 0) {
    // The next job would mention this one as gone: harmless.
  }
  ::close(fd_);  // drops the lock
}

}  // namespace hetrain::train
