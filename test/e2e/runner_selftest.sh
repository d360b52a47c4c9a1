#!/usr/bin/env bash
# The test runner's verdicts, on fakes: scripts/run-tests.sh pointed at a folder of gtest-like binaries and a
# folder of e2e scripts must count each way of stopping early as a failure — a gtest binary that exits 0
# without its summary or with fewer results than it listed, an _mpi binary without its MPI-SUMMARY line or
# with a short one, an e2e script that exits 0 without a final PASS line — and still count the honest ones
# as passed and skipped. Also: float_compare (lib.sh) fails on NaN and Inf, and a real gtest binary run
# with GTEST_FILTER is counted exactly.
source "$(dirname "$0")/lib.sh"
mkdir -p "$TMP/bin" "$TMP/e2e" "$TMP/logs"

# fake_gtest NAME LISTED BODY: a gtest-like binary that lists LISTED tests (suite Fake) and runs BODY.
fake_gtest() {
  local name=$1 listed=$2 body=$3 i
  {
    echo '#!/usr/bin/env bash'
    echo 'if [ "${1:-}" = --gtest_list_tests ]; then'
    echo '  echo "Running main() from fake"; echo "Fake."'
    for ((i = 0; i < listed; ++i)); do echo "  echo '  T$i'"; done
    echo '  echo "DISABLED_Off."; echo "  T0"; echo "Fake2."; echo "  DISABLED_T1"'  # listed, never run
    echo '  exit 0'
    echo 'fi'
    echo "$body"
  } >"$TMP/bin/$name"
  chmod +x "$TMP/bin/$name"
}
# gtest's closing lines for P passed, F failed, S skipped
summary() {
  echo "echo '[==========] $(($1 + $2 + $3)) tests from 1 test suite ran. (1 ms total)'"
  echo "echo '[  PASSED  ] $1 tests.'"
  [ "$3" -gt 0 ] && echo "echo '[  SKIPPED ] $3 tests, listed below:'"
  [ "$2" -gt 0 ] && echo "echo '[  FAILED  ] $2 tests, listed below:'"
  echo "exit $([ "$2" -gt 0 ] && echo 1 || echo 0)"
}
fake_gtest test_good 3 "$(summary 2 0 1)"                                          # 2 passed, 1 skipped
fake_gtest test_honest_fail 2 "$(summary 1 1 0)"                                   # 1 passed, 1 failed
fake_gtest test_no_summary 4 "echo '[ RUN      ] Fake.T0'; exit 0"                 # stops early, exit 0
fake_gtest test_short 3 "$(summary 2 0 0)"                                         # ran 2 of 3, exit 0
fake_gtest test_crash 2 "echo '[ RUN      ] Fake.T0'; kill -SEGV \$\$"             # crashes
# _mpi fakes run under mpirun -n 4; rank 0 prints the summary
mpi_line='[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] && echo "MPI-SUMMARY expected=%s passed=%s failed=0 skipped=0 ranks=4"; exit 0'
fake_gtest test_good_mpi 2 "$(printf "$mpi_line" 2 2)"                             # 2 passed
fake_gtest test_no_summary_mpi 2 "echo '[ RUN      ] Fake.T0'; exit 0"             # stops early, exit 0
fake_gtest test_short_mpi 3 "$(printf "$mpi_line" 3 2)"                            # 2 of its 3
fake_gtest test_unlisted_mpi 3 "$(printf "$mpi_line" 2 2)"                         # expects fewer than listed

e2e() { printf '#!/usr/bin/env bash\nsource %s/test/e2e/lib.sh\n%s\n' "$PWD" "$2" >"$TMP/e2e/$1.sh"; }
e2e ok 'echo working; pass "it worked"'
e2e early_exit 'echo working; exit 0; pass "never reached"'
e2e pass_not_last 'echo "PASS: too early"; echo "more output"'
e2e pass_but_failed 'echo "PASS: looks fine"; exit 3'
e2e skipped 'skip "nothing to run here"'
e2e failed 'fail "broken"'

HETRAIN_TEST_BIN=$TMP/bin HETRAIN_TEST_E2E=$TMP/e2e HETRAIN_TEST_LOGS=$TMP/logs scripts/run-tests.sh >"$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
[ $rc -ne 0 ] || fail "the runner exited 0 with failures"
# verdict NAME REGEX: the runner's line for NAME matches REGEX
verdict() {
  grep -E "^$1 " "$TMP/out" | grep -qE "$2" || fail "$1: expected a line matching '$2'"
}
verdict test_good '^test_good +2 passed, 0 failed, 1 skipped$'
verdict test_honest_fail '1 passed, 1 failed, 0 skipped$'
verdict test_no_summary 'FAILED: no gtest summary line'
verdict test_short 'FAILED: 2 of 3 tests accounted for'
verdict test_crash 'FAILED: no gtest summary line'
verdict test_good_mpi '2 passed, 0 failed, 0 skipped \(4 ranks\)$'
verdict test_no_summary_mpi 'FAILED: no MPI-SUMMARY line'
verdict test_short_mpi 'FAILED: 2 of 3 tests accounted for'
verdict test_unlisted_mpi 'FAILED: MPI-SUMMARY expected 2 tests, the listing names 3'
verdict e2e/ok 'passed'
verdict e2e/early_exit 'FAILED \(exit 0 without a final PASS line\)'
verdict e2e/pass_not_last 'FAILED \(exit 0 without a final PASS line\)'
verdict e2e/pass_but_failed 'FAILED \(exit 3\)'
verdict e2e/skipped 'skipped: SKIP: nothing to run here'
verdict e2e/failed 'FAILED \(exit 1\)'
# passed: 2 + 1 + 2 + 2 + 2 (short_mpi) + 2 (unlisted_mpi) + 1 e2e = 12; failed: honest 1, no_summary 4,
# short 1, crash 2, no_summary_mpi 2, short_mpi 1, unlisted_mpi 1, e2e 4 = 16; skipped 1 + 1 e2e = 2.
want="12 passed, 16 failed, 2 skipped"
[ "$(tail -1 "$TMP/out")" = "$want" ] || fail "final line '$(tail -1 "$TMP/out")', expected '$want'"

# A real binary under a filter: the listing honours GTEST_FILTER, so the counts match exactly.
if [ -x build/bin/test_core ]; then
  mkdir -p "$TMP/real" "$TMP/none"
  ln -s "$PWD/build/bin/test_core" "$TMP/real/test_core"
  n=$(GTEST_FILTER='Tensor.*' build/bin/test_core --gtest_list_tests | grep -c '^  ')
  [ "$n" -gt 1 ] || fail "test_core lists no Tensor tests"
  GTEST_FILTER='Tensor.*' HETRAIN_TEST_BIN=$TMP/real HETRAIN_TEST_E2E=$TMP/none HETRAIN_TEST_LOGS=$TMP/logs \
    scripts/run-tests.sh >"$TMP/real.out" 2>&1 || { cat "$TMP/real.out"; fail "filtered test_core failed"; }
  cat "$TMP/real.out"
  grep -qE "^test_core +$n passed, 0 failed, 0 skipped$" "$TMP/real.out" || fail "filtered test_core: want $n passed"
fi

# float_compare: NaN or Inf in either file fails, even where every other comparison would pass.
/usr/bin/python3 - "$TMP" <<'PY' || fail "writing float files"
import array, sys
t = sys.argv[1]
for name, v in (("a", [1.0, 2.0, 3.0]), ("nan", [float("nan")] * 3), ("mixed", [1.0, float("nan"), 3.0]),
                ("inf", [1.0, 2.0, float("inf")]), ("close", [1.0, 2.0, 3.00001])):
    array.array('f', v).tofile(open("%s/%s.bin" % (t, name), "wb"))
PY
float_compare "$TMP/a.bin" "$TMP/close.bin" 1e-5 || fail "float_compare: equal files differ"
for f in nan mixed inf; do
  float_compare "$TMP/a.bin" "$TMP/$f.bin" 1e-5 && fail "float_compare passes against $f"
  float_compare "$TMP/$f.bin" "$TMP/a.bin" 1e-5 && fail "float_compare passes with $f as the reference"
done
float_compare "$TMP/nan.bin" "$TMP/nan.bin" 1e-5 && fail "float_compare passes two all-NaN files"
pass "the runner fails binaries and scripts that stop early; float_compare fails on NaN/Inf"
