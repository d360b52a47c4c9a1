#include "hetrain/error.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace hetrain {
namespace {
// Written once at start-up before any worker thread exists; read-only afterwards.
int g_rank = -1;
std::string g_host;
bool g_locations = false;  // --verbose: every message carries its source location

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

// With --verbose the message itself ends with its location, so that it survives being passed on as text
// (an error every rank agrees on travels as its message, dist/agreement.cpp). Once: an internal error has it.
bool ends_with_location(const std::string& m) {  // "... [file.cpp:123]"
  const size_t open = m.rfind(" [");
  if (m.empty() || m.back() != ']' || open == std::string::npos) return false;
  const size_t colon = m.rfind(':');
  return colon != std::string::npos && colon > open && colon + 2 < m.size() &&
         m.find_first_not_of("0123456789", colon + 1) == m.size() - 1;
}

std::string with_location(const std::string& message, const char* file, int line) {
  if (!g_locations || internal_error(message) || !file || ends_with_location(message)) return message;
  return message + " [" + basename_of(file) + ":" + std::to_string(line) + "]";
}
}  // namespace

void set_error_locations(bool on) { g_locations = on; }

void set_error_context(int rank, const std::string& host) {
  g_rank = rank;
  g_host = host;
}

std::string error_context_prefix() {
  if (g_rank < 0) return "";
  return "rank " + std::to_string(g_rank) + " on " + g_host + ": ";
}

namespace {
// Where a value is cut: kQuotedChars bytes, moved back off any UTF-8 continuation byte so that no
// character is split.
size_t cut_of(const std::string& value) {
  if (value.size() <= kQuotedChars) return value.size();
  size_t end = kQuotedChars;
  while (end > 0 && (static_cast<unsigned char>(value[end]) & 0xC0) == 0x80) --end;
  return end;
}
}  // namespace

std::string clipped(const std::string& value) {
  const size_t end = cut_of(value);
  std::string out;
  for (size_t i = 0; i < end; ++i) {
    const unsigned char ch = static_cast<unsigned char>(value[i]);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch < 0x20 || ch == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", ch);
      out += hex;
    } else {
      out += char(ch);
    }
  }
  if (end < value.size()) out += "\u2026";
  return out;
}

std::string quoted(const std::string& value) {
  std::string out = "'" + clipped(value) + "'";
  if (cut_of(value) < value.size()) out += " (" + std::to_string(value.size()) + " bytes)";
  return out;
}

Error::Error(const std::string& message, const char* file, int line)
    : std::runtime_error(error_context_prefix() + with_location(message, file, line) +
                         location_suffix(message, file, line)),
      message_(with_location(message, file, line)),
      file_(file),
      line_(line) {}

}  // namespace hetrain

