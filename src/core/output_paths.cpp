// The output-path rule of every tool (hetrain/output_paths.hpp).
#include "hetrain/output_paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "hetrain/error.hpp"

namespace hetrain {
namespace {

// What identifies a file: device and inode when it exists (links followed); otherwise the absolute path
// with its folder's symbolic links resolved (two names of a file not yet written).
struct FileIdentity {
  bool exists = false;
  mode_t mode = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string resolved;
};

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

FileIdentity identify(const std::string& path) {
  FileIdentity id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.mode = st.st_mode;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
  }
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char buf[PATH_MAX];
  id.resolved = ::realpath(folder_of(path).c_str(), buf) ? std::string(buf) + "/" + base : path;
  return id;
}

bool same(const FileIdentity& a, const FileIdentity& b) {
  if (a.exists && b.exists) return a.dev == b.dev && a.ino == b.ino;
  return !a.exists && !b.exists && a.resolved == b.resolved;
}

const char* kind_of(mode_t mode) {
  return S_ISDIR(mode) ? "a folder" : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
         : S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket" : "not a file";
}

// Why no file can be created at `path` ("" when its folder is an existing, writable folder).
std::string folder_problem(const std::string& path) {
  const std::string dir = folder_of(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return errno == ENOENT ? "the folder " + dir + " does not exist" : "the folder " + dir + ": " + std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a folder";
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return "the folder " + dir + " is not writable (" + std::strerror(errno) + ")";
  return "";
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) { return same(identify(a), identify(b)); }

std::string output_paths_problem(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  std::vector<FileIdentity> in_ids, out_ids;
  for (const NamedPath& i : inputs) in_ids.push_back(i.path.empty() ? FileIdentity() : identify(i.path));
  for (const NamedPath& o : outputs) out_ids.push_back(o.path.empty() ? FileIdentity() : identify(o.path));
  for (size_t k = 0; k < outputs.size(); ++k) {
    const NamedPath& o = outputs[k];
    if (o.path.empty()) continue;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].path.empty() && same(out_ids[k], in_ids[i]))
        return o.name() + " is the same file as the input " + inputs[i].path + " (" + inputs[i].option +
               "): refusing to overwrite an input; choose another output";
    if (out_ids[k].exists && !S_ISREG(out_ids[k].mode))
      return o.name() + ": not a regular file (" + kind_of(out_ids[k].mode) +
             "): refusing to write over it; choose another output";
    const std::string folder = folder_problem(o.path);
    if (!folder.empty()) return o.name() + ": cannot write there: " + folder;
    for (size_t j = 0; j < k; ++j)
      if (!outputs[j].path.empty() && same(out_ids[k], out_ids[j]))
        return o.name() + " is the same file as " + outputs[j].name() +
               ": one output would overwrite the other; choose different outputs";
  }
  return "";
}

void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  const std::string problem = output_paths_problem(outputs, inputs);
  if (!problem.empty()) HT_THROW(problem);
}

}  // namespace hetrain
