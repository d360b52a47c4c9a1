// HT_MPI_CHECK's failure path: turns an MPI return code into a hetrain::Error with MPI's own text.
#include <mpi.h>

#include <cstdio>

#include "hetrain/error.hpp"

namespace hetrain {
void detail_mpi_fail(const char* call, int rc, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) std::snprintf(text, sizeof text, "code %d", rc);
  throw Error(detail::concat("MPI call ", call, " failed: ", text), file, line);
}
}  // namespace hetrain
