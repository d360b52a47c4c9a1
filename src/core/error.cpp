#include "hetrain/error.hpp"

#include <cstring>

namespace hetrain {
namespace {
// Written once at start-up before any worker thread exists; read-only afterwards.
int g_rank = -1;
std::string g_host;

const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// Internal errors are hetrain's own faults or a library's: a broken invariant ("internal: ...") or a failed
// MPI, CUDA, cuDNN, cuBLAS or NCCL call (the check macros' wording). Their text keeps the source location,
// which a bug report needs; for every other error (bad input, a missing file) it is noise, and main()
// adds it only for --verbose.
bool internal_error(const std::string& message) {
  static const char* const kPrefixes[] = {"internal:", "MPI call ", "MPI_", "CUDA call ", "CUDA kernel ", "cuDNN call ",
                                          "cuBLAS call ", "NCCL call "};
  for (const char* p : kPrefixes)
    if (message.compare(0, std::strlen(p), p) == 0) return true;
  return false;
}

std::string location_suffix(const std::string& message, const char* file, int line) {
  if (!internal_error(message)) return "";
  return std::string(" [") + basename_of(file) + ":" + std::to_string(line) + "]";
}
}  // namespace

void set_error_context(int rank, const std::string& host) {
  g_rank = rank;
  g_host = host;
}

std::string error_context_prefix() {
  if (g_rank < 0) return "";
  return "rank " + std::to_string(g_rank) + " on " + g_host + ": ";
}

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(error_context_prefix() + message + location_suffix(message, file, line)),
      message_(message),
      file_(file),
      line_(line) {}

}  // namespace hetrain

