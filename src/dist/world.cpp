// MPI world: start-up, node-local ranks, abort, rank table.
#include "hetrain/dist/world.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>

#include "hetrain/dist/slurm_het.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {
namespace {
std::unique_ptr<World> g_world;

std::string host_name() {
  char name[MPI_MAX_PROCESSOR_NAME + 1] = {0};
  int len = 0;
  if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS && len > 0) return std::string(name, size_t(len));
  if (gethostname(name, sizeof name - 1) == 0) return name;
  return "unknown-host";
}
}  // namespace

World& World::init(int* argc, char*** argv) {
  if (g_world) return *g_world;
  std::unique_ptr<World> w(new World());
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
      std::fprintf(stderr, "hetrain: MPI_Init_thread failed\n");
      throw Error("MPI_Init_thread failed", __FILE__, __LINE__);
    }
    w->started_mpi_ = true;
  } else {
    MPI_Query_thread(&provided);  // a test main may have used plain MPI_Init: still fine, we stay funneled
  }
  // From here on MPI calls return codes; HT_MPI_CHECK turns them into errors naming the call.
  HT_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  HT_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank_));
  HT_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &w->size_));
  w->host_ = host_name();
  w->component_ = slurm_het_component().label();
  set_error_context(w->rank_, w->host_);
  if (w->started_mpi_ && provided < MPI_THREAD_FUNNELED)
    HT_THROW("MPI offers thread level ", provided, " but hetrain needs MPI_THREAD_FUNNELED");
  HT_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank_, MPI_INFO_NULL, &w->node_comm_));
  HT_MPI_CHECK(MPI_Comm_set_errhandler(w->node_comm_, MPI_ERRORS_RETURN));
  HT_MPI_CHECK(MPI_Comm_rank(w->node_comm_, &w->local_rank_));
  HT_MPI_CHECK(MPI_Comm_size(w->node_comm_, &w->local_size_));
  g_world = std::move(w);
  return *g_world;
}

World& World::get() {
  HT_CHECK(g_world, "World::get() before World::init()");
  return *g_world;
}

void World::finalize() {
  if (finalized_) return;
  finalized_ = true;
  int done = 0;
  MPI_Finalized(&done);
  if (done) return;
  if (node_comm_ != MPI_COMM_NULL) MPI_Comm_free(&node_comm_);
  if (started_mpi_) MPI_Finalize();
}

void World::abort(const std::string& line, int code) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
  int initialized = 0, done = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&done);
  if (initialized && !done) MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
  std::_Exit(code == 0 ? 1 : code);
}

std::string World::rank_table(const std::string& device) const {
  std::ostringstream mine;
  mine << rank_ << '\t' << host_ << '\t' << local_rank_ << '/' << local_size_ << '\t' << device;
  std::vector<std::string> rows = allgather_strings(MPI_COMM_WORLD, mine.str());
  std::vector<std::string> components = allgather_strings(MPI_COMM_WORLD, component_);
  bool heterogeneous_job = false;
  for (const auto& c : components) heterogeneous_job |= !c.empty();
  std::ostringstream table;
  table << "rank\thost\tlocal\tdevice" << (heterogeneous_job ? "\tcomponent" : "") << '\n';
  for (size_t r = 0; r < rows.size(); ++r) {
    table << rows[r];
    if (heterogeneous_job) table << '\t' << (components[r].empty() ? "-" : components[r]);
    table << '\n';
  }
  return table.str();
}

void World::check_same_config(const std::string& canonical_text) const {
  dist::check_same_config(MPI_COMM_WORLD, canonical_text, component_);
}

void World::check_identical(const float* data, int64_t n, const char* what) const {
  dist::check_identical(MPI_COMM_WORLD, data, n, what);
}

}  // namespace hetrain::dist
