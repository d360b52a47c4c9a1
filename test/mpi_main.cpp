// GoogleTest main for test groups that run under mpirun (test/<group>_mpi/). MPI starts once; every rank
// runs every test; only rank 0 prints gtest's report. A test counts as failed when it failed on ANY rank:
// at the end the failed test names of all ranks are gathered and rank 0 prints one line
//   MPI-SUMMARY passed=P failed=F skipped=S ranks=N
// which scripts/run-tests.sh reads, and the exit code is non-zero on every rank if anything failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace {
std::string failed_names_of_this_rank() {
  std::string names;
  const auto* unit = ::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit->total_test_suite_count(); ++s) {
    const auto* suite = unit->GetTestSuite(s);
    for (int t = 0; t < suite->total_test_count(); ++t) {
      const auto* info = suite->GetTestInfo(t);
      if (info->should_run() && info->result()->Failed())
        names += std::string(suite->name()) + "." + info->name() + "\n";
    }
  }
  return names;
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) delete listeners.Release(listeners.default_result_printer());
  const int local_rc = RUN_ALL_TESTS();  // the verdict is the union over ranks, computed below
  (void)local_rc;

  std::string mine = failed_names_of_this_rank();
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size);
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> displs(size, 0);
  int total = 0;
  for (int r = 0; r < size; ++r) { displs[r] = total; total += lens[r]; }
  std::string all(rank == 0 ? total : 0, '\0');
  MPI_Gatherv(mine.data(), len, MPI_CHAR, rank == 0 ? all.data() : nullptr, lens.data(), displs.data(), MPI_CHAR, 0,
              MPI_COMM_WORLD);
  int any_failed = 0;
  if (rank == 0) {
    std::set<std::string> failed;
    size_t start = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (all[i] == '\n') { failed.insert(all.substr(start, i - start)); start = i + 1; }
    const auto* unit = ::testing::UnitTest::GetInstance();
    int ran = unit->test_to_run_count(), skipped = unit->skipped_test_count();
    for (const auto& name : failed) std::printf("MPI-FAILED %s\n", name.c_str());
    std::printf("MPI-SUMMARY passed=%d failed=%zu skipped=%d ranks=%d\n", ran - int(failed.size()) - skipped,
                failed.size(), skipped, size);
    std::fflush(stdout);
    any_failed = failed.empty() ? 0 : 1;
  }
  MPI_Bcast(&any_failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
