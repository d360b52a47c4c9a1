// hetrain/error.hpp — the one error type and the check macros.
//
// Every failure in hetrain becomes a hetrain::Error carrying a message, the source location and (once MPI
// is up) the rank and host. Deep code throws; only main() catches, prints one line and ends the job
// (MPI_Abort when more than one rank runs), so no rank is left waiting in a collective.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hetrain {

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, const char* file, int line);
  const std::string& message() const { return message_; }  // without rank or host; location only with --verbose
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  std::string message_;
  const char* file_;
  int line_;
};

// An error that EVERY rank has detected and agreed on (bad input found during validation, before the
// first collective of training). main() prints it once, on rank 0, and all ranks exit cleanly, instead of
// the MPI_Abort path used when a single rank fails.
class AgreedError : public Error {
 public:
  using Error::Error;
};

// A value read from a file or given by a user, ready to go into an error message: in single quotes, control
// characters escaped (the message stays one line), and at most kQuotedChars characters of it, then
// "…' (N bytes)" — a 50 MB attribute makes a readable line, not a 50 MB one. Every message that echoes
// such a value goes through quoted() (or clipped(), for a template that supplies its own quotes).
constexpr size_t kQuotedChars = 200;
std::string quoted(const std::string& value);
// The same text without the quotes and the byte count: escaped, cut after kQuotedChars with "…".
std::string clipped(const std::string& value);

// --verbose: every Error's message ends with its source location from now on ("... [setup.cpp:212]"), as an
// internal error's always does. Set once at start-up, before any worker thread exists.
void set_error_locations(bool on);

// Rank and host that every Error message carries from now on ("rank 3 on node17").
// Set once by the MPI world at start-up; before that errors carry no rank.
void set_error_context(int rank, const std::string& host);
// "rank 3 on node17: " or "" when no context has been set.
std::string error_context_prefix();

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  return os.str();
}
}  // namespace detail

}  // namespace hetrain

// HT_THROW("cannot open ", path, ": ", why) — throws hetrain::Error with file and line.
#define HT_THROW(...) throw ::hetrain::Error(::hetrain::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

// HT_CHECK(n > 0, "batch must be positive, got ", n)
#define HT_CHECK(cond, ...)                  \
  do {                                       \
    if (!(cond)) { HT_THROW(__VA_ARGS__); }  \
  } while (0)

// Library calls: the macro names the call that failed and its return code.
// MPI: returns MPI_SUCCESS on success (the world sets MPI_ERRORS_RETURN).
#define HT_MPI_CHECK(call)                                                         \
  do {                                                                             \
    int ht_mpi_rc_ = (call);                                                       \
    if (ht_mpi_rc_ != 0) { ::hetrain::detail_mpi_fail(#call, ht_mpi_rc_, __FILE__, __LINE__); } \
  } while (0)
// HDF5: negative return values (herr_t, hid_t) mean failure.
#define HT_H5_CHECK(call, ...)                                                          \
  ([&]() {                                                                              \
    auto ht_h5_rc_ = (call);                                                            \
    if (ht_h5_rc_ < 0) { HT_THROW(__VA_ARGS__, " (HDF5 call ", #call, " failed)"); }    \
    return ht_h5_rc_;                                                                   \
  }())
// BLAS routines report nothing; argument checks happen before the call (see cpu/gemm).

namespace hetrain {
[[noreturn]] void detail_mpi_fail(const char* call, int rc, const char* file, int line);
}
