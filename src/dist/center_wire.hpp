// dist/center_wire.hpp — what src/dist/elastic.cpp and src/dist/center_wire.cpp (the 16-bit center trades)
// share inside the distributed layer.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "hetrain/dist/elastic.hpp"

namespace hetrain::dist {

// The 16-bit wire's windows and buffers (the layout: src/dist/center_wire.cpp).
struct ElasticCenter::Sixteen {
  MPI_Win copy = MPI_WIN_NULL, inbox = MPI_WIN_NULL, flags = MPI_WIN_NULL;
  uint16_t* copy_base = nullptr;   // this rank's copy of its shard
  uint16_t* inbox_base = nullptr;  // this rank's inbox: slot o at o × its shard size
  std::vector<uint16_t> out;       // push: the rounded delta (count values)
  std::vector<uint16_t> in;        // read_for_trade: the copies' values (count)
  std::vector<int64_t> sent;       // push: per owner, the pushes posted there so far
  std::vector<int64_t> consumed;   // push: per owner, what it has consumed of them
  std::vector<int64_t> seen;       // serve: this rank's flags (2 × ranks)
  std::vector<const uint16_t*> posted;  // serve: the slots with a push not yet added
  bool serving = false;
};


// MPI_Win_allocate, or a one-line error that says what to do (src/dist/elastic.cpp).
void allocate_window(MPI_Aint bytes, int unit, MPI_Comm comm, void* base, MPI_Win* win, const char* what);
// Serves the open 16-bit ElasticCenter's shard, if there is one (RmaProgress::poll calls it).
void serve_live_center();

}  // namespace hetrain::dist
