// Private to src/dist: checks whose failure every rank detects identically (configuration validated
// before the first collective, cross-rank comparisons whose result was allgathered). They throw
// hetrain::AgreedError so main() prints one line from rank 0 and all ranks exit without MPI_Abort.
#pragma once

#include "hetrain/error.hpp"

#define HT_AGREED_THROW(...) \
  throw ::hetrain::AgreedError(::hetrain::detail::concat(__VA_ARGS__), __FILE__, __LINE__)
#define HT_AGREED_CHECK(cond, ...)                \
  do {                                            \
    if (!(cond)) { HT_AGREED_THROW(__VA_ARGS__); } \
  } while (0)
