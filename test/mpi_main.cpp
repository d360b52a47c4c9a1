// GoogleTest main for test groups that run under mpirun (test/<group>_mpi/). MPI starts once; every rank
// runs every test; only rank 0 prints gtest's report. A test counts as failed when it failed on ANY rank:
// at the end the failed test names of all ranks are gathered and rank 0 prints one line
//   MPI-SUMMARY expected=E passed=P failed=F skipped=S ranks=N
// which scripts/run-tests.sh reads. E is the number of tests selected to run; P, F and S count only tests
// that ran to their end on rank 0 (F: failed on any rank), so P + F + S falls short of E when tests did not
// run. The exit code is non-zero on every rank if anything failed or fell short; a rank that stops early
// leaves no MPI-SUMMARY line at all, which the runner counts as a failure.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <set>
#include <string>
#include <vector>

namespace {
// Counts the tests that reached their end on this rank (a test that never ran is not passed).
class EndedCounter : public ::testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const ::testing::TestInfo& info) override {
    ended.insert(std::string(info.test_suite_name()) + "." + info.name());
  }
  std::set<std::string> ended;
};

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
  auto* counter = new EndedCounter;  // owned by gtest's listener list
  listeners.Append(counter);
  const int local_rc = RUN_ALL_TESTS();  // the verdict is the union over ranks, computed below
  (void)local_rc;
  if (GTEST_FLAG_GET(list_tests)) {  // --gtest_list_tests: nothing ran, nothing to report
    MPI_Finalize();
    return 0;
  }

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
    int passed = 0, skipped = 0;
    for (int s = 0; s < unit->total_test_suite_count(); ++s) {
      const auto* suite = unit->GetTestSuite(s);
      for (int t = 0; t < suite->total_test_count(); ++t) {
        const auto* info = suite->GetTestInfo(t);
        const std::string name = std::string(suite->name()) + "." + info->name();
        if (!info->should_run() || failed.count(name) || !counter->ended.count(name)) continue;
        if (info->result()->Skipped())
          ++skipped;
        else
          ++passed;
      }
    }
    const int expected = unit->test_to_run_count();
    for (const auto& name : failed) std::printf("MPI-FAILED %s\n", name.c_str());
    std::printf("MPI-SUMMARY expected=%d passed=%d failed=%zu skipped=%d ranks=%d\n", expected, passed,
                failed.size(), skipped, size);
    std::fflush(stdout);
    any_failed = failed.empty() && passed + int(failed.size()) + skipped == expected ? 0 : 1;
  }
  MPI_Bcast(&any_failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
