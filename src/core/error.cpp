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
    : std::runtime_error(error_context_prefix() + message + " [" + basename_of(file) + ":" +
                         std::to_string(line) + "]"),
      message_(message),
      file_(file),
      line_(line) {}

}  // namespace hetrain

