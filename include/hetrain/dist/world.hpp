// hetrain/dist/world.hpp — the MPI world every rank lives in.
//
// World::init starts MPI (or adopts an MPI that a test main already started), makes MPI calls return error
// codes instead of aborting (so HT_MPI_CHECK can name the call), learns the host and the node-local rank
// from a shared-memory communicator, and tags every later hetrain::Error with "rank R on HOST".
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::dist {

class World {
 public:
  // Once per process; later calls return the same world. Requests MPI_THREAD_FUNNELED (only the main
  // thread calls MPI; the prefetcher threads never do) and fails if the library offers less.
  static World& init(int* argc, char*** argv);
  // The world made by init(); throws if init() has not run.
  static World& get();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // rank among the processes on this node
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }
  // This rank's component of a Slurm heterogeneous job, "1 (cpu)"; "" outside one (dist/slurm_het.hpp).
  const std::string& component() const { return component_; }
  MPI_Comm comm() const { return MPI_COMM_WORLD; }
  MPI_Comm node_comm() const { return node_comm_; }

  // MPI_Finalize when this world started MPI (a test main that started MPI finalizes it itself).
  void finalize();
  // Prints `line` (one line) to stderr and ends every rank with MPI_Abort, so nobody waits forever.
  [[noreturn]] void abort(const std::string& line, int code = 1);

  // Collective. Every rank passes its device string ("cpu", "cuda:0 NVIDIA H200"); returns on every rank
  // the table "rank  host  local  device" with one line per rank (rank 0 prints it), and a column
  // "component" when the world spans the components of a Slurm heterogeneous job.
  std::string rank_table(const std::string& device) const;

  // Collective. Throws hetrain::Error on EVERY rank when the canonical configuration text (one "key=value"
  // per line) is not the same on all ranks; the message names the first rank that differs from rank 0
  // and its first differing line, and says when the two ranks are in different heterogeneous-job components.
  void check_same_config(const std::string& canonical_text) const;

  // Collective. Bitwise checksum of data[0, n) compared across ranks; throws on every rank naming the ranks
  // whose bits differ from rank 0's. `what` names the buffer ("parameters").
  void check_identical(const float* data, int64_t n, const char* what) const;

 private:
  World() = default;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  std::string component_;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  bool started_mpi_ = false;
  bool finalized_ = false;
};

// Helpers usable on any communicator (collective over `comm`).
uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed = 1469598103934665603ull);
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine);
// Throws (on every rank) as World::check_same_config does. `group` names the rank's part of the job (its
// heterogeneous-job component) for the message; "" when there are no parts.
void check_same_config(MPI_Comm comm, const std::string& canonical_text, const std::string& group = "");
void check_identical(MPI_Comm comm, const float* data, int64_t n, const char* what);

}  // namespace hetrain::dist
