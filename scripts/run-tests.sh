#!/usr/bin/env bash
# Runs every hetrain test and ends with one line: "N passed, M failed, K skipped".
#   build/bin/test_<group>        GoogleTest binaries (test/<group>/*.cpp)
#   build/bin/test_<group>_mpi    GoogleTest under mpirun; its ranks run every test, rank 0 reports one line
#                                 "MPI-SUMMARY expected=E passed=P failed=F skipped=S ranks=N" (test/mpi_main.cpp)
#   test/e2e/*.sh                 end-to-end scripts: pass = exit 0 AND a last non-empty line starting with
#                                 "PASS" (lib.sh's pass); exit 77 = skipped (a "SKIP: why" line); else fail
# A binary is first asked which tests it will run (--gtest_list_tests, honouring GTEST_FILTER); it fails
# unless its summary is there and passed + failed + skipped is that number: a binary that stops early, even
# with exit code 0, cannot pass. The tests it did not account for count as failed.
# Options: -k PATTERN runs only binaries/scripts whose name contains PATTERN.
# Environment: GTEST_FILTER (applies to every binary), HETRAIN_TEST_BIN, HETRAIN_TEST_E2E and
# HETRAIN_TEST_LOGS (the folders of binaries, scripts and logs; test/e2e/runner_selftest.sh points them at
# fakes to check this script's verdicts).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${HETRAIN_TEST_BIN:-build/bin}
E2E=${HETRAIN_TEST_E2E:-test/e2e}
LOG=${HETRAIN_TEST_LOGS:-build/test-logs}
mkdir -p "$LOG"
pattern=""
[ "${1:-}" = "-k" ] && pattern="${2:-}"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
# OpenMPI over shared memory on one machine; quiet about missing high-speed networks.
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
# Ranks waiting in a collective yield the core instead of spinning (ranks may outnumber cores here).
export OMPI_MCA_mpi_yield_when_idle=1

passed=0 failed=0 skipped=0
failures=()

# expected_tests LISTING: the number of tests a gtest listing names (indented lines), less the disabled
# ones, which gtest lists but does not run unless asked to.
expected_tests() {
  local also_disabled=${GTEST_ALSO_RUN_DISABLED_TESTS:-0}
  awk -v all="$also_disabled" '
    /^[^ ]/ { suite = $1 }
    /^  [^ ]/ { if (all != "0" || (suite !~ /^DISABLED_/ && $1 !~ /^DISABLED_/)) n++ }
    END { print n + 0 }' "$1"
}

# gtest_counts LOG: "P F S" from gtest's closing lines, or nothing when there is no closing summary.
gtest_counts() {
  local log=$1 p f s
  grep -qE '^\[==========\] [0-9]+ tests? from .* ran' "$log" || return 0
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+' | head -1)
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+' | head -1)
  s=$(grep -E '^\[  SKIPPED \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+' | head -1)
  echo "${p:-0} ${f:-0} ${s:-0}"
}

# mpi_counts LOG: "P F S E" from the MPI-SUMMARY line, or nothing when it is missing or malformed.
mpi_counts() {
  grep -m1 '^MPI-SUMMARY' "$1" | sed -nE \
    's/^MPI-SUMMARY expected=([0-9]+) passed=([0-9]+) failed=([0-9]+) skipped=([0-9]+) .*/\2 \3 \4 \1/p'
}

for bin in "$BIN"/test_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  name=$(basename "$bin")
  [ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
  log="$LOG/$name.log"
  printf '%-28s ' "$name"
  mpi=0; [[ "$name" == *_mpi ]] && mpi=1
  ranks=4
  if [ $mpi = 1 ]; then run=(mpirun -n $ranks "$bin"); list=(mpirun -n 1 "$bin"); else run=("$bin"); list=("$bin"); fi
  timeout 120 "${list[@]}" --gtest_list_tests >"$log.list" 2>&1
  lrc=$?
  if [ $lrc -ne 0 ]; then
    failed=$((failed + 1)); failures+=("$name (listing its tests: exit $lrc, see $log.list)")
    echo "FAILED: could not list its tests (exit $lrc)"
    continue
  fi
  expected=$(expected_tests "$log.list")
  # (in a subshell, so that bash's note of a crash goes to the log too)
  ( timeout 600 "${run[@]}" >"$log" 2>&1; exit $? ) 2>>"$log"
  rc=$?
  if [ $mpi = 1 ]; then counts=$(mpi_counts "$log"); else counts=$(gtest_counts "$log"); fi
  problem=""
  if [ -z "$counts" ]; then
    p=0 f=0 s=0
    problem="no $([ $mpi = 1 ] && echo MPI-SUMMARY || echo gtest summary) line"
  else
    read -r p f s e <<<"$counts"
    if [ $mpi = 1 ] && [ "$e" != "$expected" ]; then
      problem="MPI-SUMMARY expected $e tests, the listing names $expected"
    elif [ $((p + f + s)) -ne "$expected" ]; then
      problem="$((p + f + s)) of $expected tests accounted for"
    fi
  fi
  missing=$((expected - p - f - s))
  [ $missing -lt 0 ] && missing=0
  [ -n "$problem" ] && [ $missing -eq 0 ] && missing=1
  passed=$((passed + p)) skipped=$((skipped + s)) failed=$((failed + f + missing))
  echo "$p passed, $f failed, $s skipped$([ $mpi = 1 ] && echo " ($ranks ranks)")${problem:+ — FAILED: $problem (exit $rc)}"
  if [ -n "$problem" ]; then
    failures+=("$name ($problem, exit $rc, see $log)")
  elif [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
    # crashed or aborted after its summary without reporting a failure: count the binary as one failure
    failed=$((failed + 1)); failures+=("$name (exit $rc, see $log)")
  elif [ "$f" -ne 0 ]; then
    failures+=("$name (see $log)")
  fi
done

for script in "$E2E"/*.sh; do
  [[ "$(basename "$script")" == lib* ]] && continue
  [ -f "$script" ] || continue
  name=$(basename "$script" .sh)
  [ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
  log="$LOG/e2e_$name.log"
  printf '%-28s ' "e2e/$name"
  start=$(date +%s)
  timeout 900 bash "$script" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  last=$(grep -v '^[[:space:]]*$' "$log" | tail -1)
  if [ $rc -eq 0 ] && [[ "$last" == PASS* ]]; then
    passed=$((passed + 1)); echo "passed (${secs}s)"
  elif [ $rc -eq 77 ]; then
    skipped=$((skipped + 1)); echo "skipped: $(grep -m1 '^SKIP' "$log" || echo 'no reason given')"
  else
    why="exit $rc"; [ $rc -eq 0 ] && why="exit 0 without a final PASS line"
    failed=$((failed + 1)); failures+=("e2e/$name ($why, see $log)")
    echo "FAILED ($why)"; tail -5 "$log" | sed 's/^/    /'
  fi
done

for f in "${failures[@]}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
