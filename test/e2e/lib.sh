# Shared by the end-to-end tests (sourced, not run: the runner only runs *.sh files that do not start with lib).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
# Ranks waiting in a collective yield the core instead of spinning (ranks may outnumber cores here).
export OMPI_MCA_mpi_yield_when_idle=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
HETRAIN=build/bin/hetrain
PACK=build/bin/hetrain-pack
TMP=$(mktemp -d)
# at_exit CMD: run CMD when the script ends (the newest first, $TMP's removal last).
AT_EXIT=('rm -rf "$TMP"')
at_exit() { AT_EXIT=("$1" "${AT_EXIT[@]}"); }
trap 'for cmd in "${AT_EXIT[@]}"; do eval "$cmd"; done' EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
# Every script ends with pass: the runner counts a script as passed only on exit 0 with this as its last line.
pass() { echo "PASS: $*"; exit 0; }
# run_mpi N ARGS...: hetrain train on N ranks, bounded in time so a hang fails the test instead of CI.
run_mpi() { local n=$1; shift; timeout 300 mpirun -n "$n" "$HETRAIN" train "$@"; }
# float_compare A B RTOL: raw float32 files equal within rtol·max|x| + 1e-6; prints the max difference.
# Any NaN or Inf in either file is a mismatch (comparisons with NaN are false, so it is checked first).
float_compare() {
  /usr/bin/python3 - "$@" <<'PY'
import sys, array, math
a, b = array.array('f'), array.array('f')
a.frombytes(open(sys.argv[1], 'rb').read()); b.frombytes(open(sys.argv[2], 'rb').read())
tol = float(sys.argv[3])
if len(a) != len(b) or len(a) == 0: print("length differs: %d vs %d" % (len(a), len(b))); sys.exit(1)
bad = [(name, sum(not math.isfinite(x) for x in v)) for name, v in ((sys.argv[1], a), (sys.argv[2], b))]
if any(n for _, n in bad):
    print("; ".join("%s: %d NaN/Inf" % (name, n) for name, n in bad if n)); sys.exit(1)
scale = max(abs(x) for x in a)
worst = max(abs(x - y) for x, y in zip(a, b))
print("%d floats, max |diff| %.3g (scale %.3g, allowed %.3g)" % (len(a), worst, scale, tol * scale + 1e-6))
sys.exit(0 if worst <= tol * scale + 1e-6 else 1)
PY
}
# start_slurm: a one-machine Slurm cluster for this test (scripts/slurm-local.sh), stopped on exit unless it
# was already running (a developer's cluster stays up). Skips without root.
start_slurm() {
  command -v srun >/dev/null || fail "missing Slurm (srun): run make deps"
  [ "$(id -u)" -eq 0 ] || skip "starting a local Slurm needs root"
  local started_here=1
  pgrep -x slurmctld >/dev/null && started_here=0
  scripts/slurm-local.sh start || fail "could not start the local Slurm cluster"
  [ $started_here -eq 1 ] && at_exit 'scripts/slurm-local.sh stop' 
  return 0
}
# need_python MODULE...: the Debian Python modules a test imports (/usr/bin/python3), or a clear failure.
need_python() {
  local m
  for m in "$@"; do
    /usr/bin/python3 -c "import $m" 2>/dev/null || fail "missing Python module $m for /usr/bin/python3: run make deps"
  done
}
