#include "hetrain/dist/agreement.hpp"

#include <string>

#include "hetrain/error.hpp"

namespace hetrain::dist {

std::string capture_problem(const std::function<void()>& work) {
  try {
    work();
  } catch (const Error& e) {
    return e.message().empty() ? "unknown error" : e.message();
  } catch (const std::bad_alloc&) {
    return "out of memory";
  }
  return "";
}

void agree_problem(MPI_Comm comm, const std::string& problem) {
  int rank = 0, size = 1;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  int mine = problem.empty() ? size : rank, first = size;
  HT_MPI_CHECK(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return;
  std::string text = problem;
  int len = int(text.size());
  HT_MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, first, comm));
  text.resize(size_t(len));
  HT_MPI_CHECK(MPI_Bcast(text.data(), len, MPI_CHAR, first, comm));
  // Name the rank only when rank 0 itself was fine (a rank-local problem, e.g. a file one node lacks).
  throw AgreedError((first > 0 ? "rank " + std::to_string(first) + ": " : std::string()) + text, __FILE__, __LINE__);
}

void agree_on(MPI_Comm comm, const std::function<void()>& work) { agree_problem(comm, capture_problem(work)); }

void agree_on_root(MPI_Comm comm, const std::function<void()>& work) {
  int rank = 0;
  HT_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  agree_problem(comm, rank == 0 ? capture_problem(work) : std::string());
}

}  // namespace hetrain::dist
