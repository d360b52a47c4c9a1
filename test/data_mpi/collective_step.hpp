// test/data_mpi/collective_step.hpp — shared by the MPI data tests.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <exception>
#include <functional>

namespace data_mpi_test {

// Runs `local` on this rank (exceptions become failures), then — collectively over comm — returns true on
// every rank when every rank is free of failures so far, false on every rank otherwise.
inline bool step(MPI_Comm comm, const std::function<void()>& local) {
  try {
    local();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << "unknown exception";
  }
  int failed = ::testing::Test::HasFailure() ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm);
  return any == 0;
}

}  // namespace data_mpi_test
