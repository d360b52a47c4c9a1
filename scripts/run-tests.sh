#!/usr/bin/env bash
# Runs every hetrain test and ends with one line: "N passed, M failed[, K skipped]".
#   build/bin/test_<group>        GoogleTest binaries (test/<group>/*.cpp)
#   build/bin/test_<group>_mpi    GoogleTest under mpirun; its ranks run every test, rank 0 reports
#   test/e2e/*.sh                 end-to-end scripts: exit 0 = pass, 77 = skipped, else fail
# Options: -k PATTERN runs only binaries/scripts whose name contains PATTERN.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
LOG=build/test-logs
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

count_gtest() {  # $1 = log file, $2 = name; adds gtest's own counts
  local log=$1 name=$2 p f s
  p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+' | head -1)
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+' | head -1)
  s=$(grep -E '^\[  SKIPPED \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+' | head -1)
  p=${p:-0} f=${f:-0} s=${s:-0}
  passed=$((passed + p)) skipped=$((skipped + s)) failed=$((failed + f))
  echo "$p passed, $f failed, $s skipped"
}

for bin in "$BIN"/test_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  [ -n "$pattern" ] && [[ "$name" != *"$pattern"* ]] && continue
  log="$LOG/$name.log"
  printf '%-28s ' "$name"
  if [[ "$name" == *_mpi ]]; then
    ranks=4
    timeout 600 mpirun -n $ranks "$bin" >"$log" 2>&1
  else
    timeout 600 "$bin" >"$log" 2>&1
  fi
  rc=$?
  before=$failed
  if [[ "$name" == *_mpi ]]; then
    summary=$(grep -m1 '^MPI-SUMMARY' "$log")
    p=$(sed -E 's/.*passed=([0-9]+).*/\1/' <<<"$summary"); f=$(sed -E 's/.*failed=([0-9]+).*/\1/' <<<"$summary")
    s=$(sed -E 's/.*skipped=([0-9]+).*/\1/' <<<"$summary")
    if [ -n "$summary" ]; then
      passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
      echo "$p passed, $f failed, $s skipped ($ranks ranks)"
    else echo "no summary"; fi
  else
    count_gtest "$log" "$name"
  fi
  if [ $rc -ne 0 ] && [ $failed -eq $before ]; then
    # crashed, hung or aborted without gtest reporting a failure: count the binary as one failure
    failed=$((failed + 1)); failures+=("$name (exit $rc, see $log)")
  elif [ $failed -ne $before ]; then
    failures+=("$name (see $log)")
  fi
done

for script in test/e2e/*.sh; do
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
  case $rc in
    0)  passed=$((passed + 1)); echo "passed (${secs}s)" ;;
    77) skipped=$((skipped + 1)); echo "skipped: $(grep -m1 '^SKIP' "$log" || echo 'no reason given')" ;;
    *)  failed=$((failed + 1)); failures+=("e2e/$name (exit $rc, see $log)"); echo "FAILED (exit $rc)"; tail -5 "$log" | sed 's/^/    /' ;;
  esac
done

for f in "${failures[@]}"; do echo "failed: $f"; done
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
