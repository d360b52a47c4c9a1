// Cross-rank checks: same configuration everywhere, bitwise-identical replicas.
#include <climits>
#include <cstring>
#include <sstream>

#include "hetrain/dist/world.hpp"
#include "dist/agreed.hpp"
#include "hetrain/error.hpp"

namespace hetrain::dist {

uint64_t fnv1a64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine) {
  int size = 1;
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  HT_CHECK(mine.size() <= size_t(INT_MAX), "allgather_strings: string of ", mine.size(), " bytes is too long");
  int len = int(mine.size());
  std::vector<int> lens(size), displs(size, 0);
  HT_MPI_CHECK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  int64_t total = 0;
  for (int r = 0; r < size; ++r) {
    displs[r] = int(total);
    total += lens[r];
  }
  HT_CHECK(total <= INT_MAX, "allgather_strings: ", total, " bytes in all is too long");
  std::string all(size_t(total), '\0');
  HT_MPI_CHECK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, comm));
  std::vector<std::string> out(size);
  for (int r = 0; r < size; ++r) out[r] = all.substr(size_t(displs[r]), size_t(lens[r]));
  return out;
}

namespace {
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}
}  // namespace

void check_same_config(MPI_Comm comm, const std::string& canonical_text, const std::string& group) {
  int size = 1;
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  uint64_t mine = fnv1a64(canonical_text.data(), canonical_text.size());
  std::vector<uint64_t> all(size);
  HT_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm));
  int first = -1;
  for (int r = 1; r < size && first < 0; ++r)
    if (all[r] != all[0]) first = r;
  if (first < 0) return;
  // Error path only: gather the texts so every rank can name the first differing line.
  std::vector<std::string> texts = allgather_strings(comm, canonical_text);
  std::vector<std::string> groups = allgather_strings(comm, group);
  std::vector<std::string> a = lines_of(texts[0]), b = lines_of(texts[first]);
  std::string detail;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    std::string la = i < a.size() ? a[i] : "<missing>", lb = i < b.size() ? b[i] : "<missing>";
    if (la != lb) {
      detail = ": rank 0 has '" + la + "', rank " + std::to_string(first) + " has '" + lb + "'";
      break;
    }
  }
  int differing = 0;
  for (int r = 1; r < size; ++r) differing += all[r] != all[0];
  if (groups[0] != groups[first]) {
    // A heterogeneous job launches each component with its own command line (srun ... : ...).
    HT_AGREED_THROW("hetjob components disagree on the configuration: rank ", first, " (component ", groups[first],
                    ") differs from rank 0 (component ", groups[0], ")", detail, " (", differing, " of ", size,
                    " ranks differ; give every component the same hetrain options)");
  }
  HT_AGREED_THROW("configuration differs between ranks: rank ", first, " differs from rank 0", detail, " (", differing,
           " of ", size, " ranks differ; launch every rank with the same options)");
}

void check_identical(MPI_Comm comm, const float* data, int64_t n, const char* what) {
  HT_CHECK(n >= 0, "check_identical(", what, "): negative length ", n);
  int size = 1;
  HT_MPI_CHECK(MPI_Comm_size(comm, &size));
  uint64_t mine[2] = {fnv1a64(data, size_t(n) * sizeof(float)), uint64_t(n)};
  std::vector<uint64_t> all(2 * size_t(size));
  HT_MPI_CHECK(MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, comm));
  std::string ranks;
  for (int r = 1; r < size; ++r)
    if (all[2 * r] != all[0] || all[2 * r + 1] != all[1]) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  if (!ranks.empty())
    HT_AGREED_THROW(what, " differ between ranks: rank(s) ", ranks, " differ bitwise from rank 0 (", n, " floats)");
}

}  // namespace hetrain::dist
