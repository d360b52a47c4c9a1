// data/mpi_check.hpp — MPI return-code check for the data subsystem.
// HT_MPI_CHECK's helper lives in src/dist, which links before src/data; the data path (and hetrain-pack,
// which links no dist code it needs) uses this self-contained twin instead.
#pragma once

#include <mpi.h>

#include "hetrain/error.hpp"

#define HT_DATA_MPI_CHECK(call)                                                    \
  do {                                                                             \
    int ht_rc_ = (call);                                                           \
    if (ht_rc_ != MPI_SUCCESS) {                                                   \
      char ht_text_[MPI_MAX_ERROR_STRING] = {0};                                   \
      int ht_len_ = 0;                                                             \
      MPI_Error_string(ht_rc_, ht_text_, &ht_len_);                                \
      HT_THROW("MPI call ", #call, " failed: ", ht_text_);                         \
    }                                                                              \
  } while (0)
