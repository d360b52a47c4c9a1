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
# set_weight SRC DST TENSOR INDEX VALUE: a copy DST of the checkpoint SRC whose /parameters/TENSOR holds VALUE
# (nan, inf or a number) at flat INDEX, its checksum recomputed as docs/checkpoint-format.md says: a file
# whose only fault is that value.
set_weight() {
  /usr/bin/python3 - "$@" <<'PY'
import shutil, sys, zlib, h5py, numpy as np
src, dst, tensor, index, value = sys.argv[1:]
shutil.copyfile(src, dst)
with h5py.File(dst, "r+") as f:
    d = f["parameters"][tensor]
    a = d[()]
    a.reshape(-1)[int(index)] = np.float32(float(value))
    d[...] = a
    crc = 0
    for group in ("parameters", "buffers", "optimizer/momentum_buffer", "ema/parameters", "ema/buffers", "powersgd"):
        for name in (sorted(f[group].keys(), key=lambda s: s.encode()) if group in f else []):
            crc = zlib.crc32(f[group][name][()].tobytes(), crc)
    f.attrs.modify("checksum_crc32", np.uint32(crc))
PY
}
# newest_checkpoint_finite DIR: the newest checkpoint-*.h5 in DIR holds only finite values (true when DIR has
# none); prints which file it read, or the tensor that is not finite.
newest_checkpoint_finite() {
  local newest
  newest=$(ls "$1"/checkpoint-*.h5 2>/dev/null | sort | tail -n 1)
  [ -z "$newest" ] && { echo "no checkpoint in $1"; return 0; }
  /usr/bin/python3 - "$newest" <<'PY'
import sys, h5py, numpy as np
bad = []
def visit(name, obj):
    if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and not np.isfinite(obj[()]).all():
        bad.append(name)
with h5py.File(sys.argv[1], "r") as f:
    f.visititems(visit)
print("%s: %s" % (sys.argv[1], "not finite: " + ", ".join(bad) if bad else "every value finite"))
sys.exit(1 if bad else 0)
PY
}
# stop_async OUT CKDIR ARGS...: a 4-rank hetrain train ARGS (an asynchronous mode) stopped by SIGUSR1 soon
# after it started training; returns its exit status (75: stopped and checkpointed). The emulated speeds
# (each rank sleeps 19x its compute) keep even a fast machine inside the run when the signal comes. Tried
# again, a little later each time, when the run ended first (the stop was not tested) or when its only
# checkpoint is at sample 0 (no push had settled yet, as when a loaded machine starts the ranks slowly); the
# last try accepts that and sets STOPPED_AT_ZERO=1. Removes CKDIR and $TMP/cov-* before each try.
stop_async() {
  local out=$1 ckdir=$2; shift 2
  local try rc launcher delays=(0.5 0.8 1.1 1.4)
  STOPPED_AT_ZERO=""
  for try in 1 2 3 4; do
    rm -rf "$ckdir" "$TMP"/cov-*
    timeout 180 mpirun -n 4 "$HETRAIN" train "$@" --checkpoint-dir "$ckdir" --emulate-speed 0.05,0.05,0.05,0.05 \
      >"$out" 2>&1 &
    launcher=$!
    for _ in $(seq 300); do grep -q "^elastic averaging" "$out" 2>/dev/null && break; sleep 0.1; done
    sleep "${delays[try - 1]}"
    pkill -USR1 -P $launcher -x mpirun  # this run's launcher only, not every mpirun on the machine
    wait $launcher; rc=$?
    if [ $rc -eq 0 ] && grep -q '^done:' "$out"; then
      echo "note: the run ended before the stop signal came (try $try); trying again"
    elif [ $rc -eq 75 ] && ! ls "$ckdir"/checkpoint-*.h5 2>/dev/null | grep -qv 'checkpoint-00000000\.h5$'; then
      STOPPED_AT_ZERO=1
      [ $try -eq 4 ] && return 75
      echo "note: the stop came before any push had settled (a checkpoint at sample 0, try $try); trying again"
    else
      return $rc
    fi
  done
  return $rc
}
# resumed_from_stop OUT TOTAL: the resumed run (output OUT) continued from the stop's checkpoint.
resumed_from_stop() {
  if [ -n "${STOPPED_AT_ZERO:-}" ]; then
    echo "note: every stop came before a push had settled; the resume starts from the checkpoint at sample 0"
    grep -q "^resume: .*checkpoint-00000000.h5 (step 0" "$1" || grep -q "^resuming at sample [0-9]* of $2\$" "$1"
  else
    grep -q "^resuming at sample [0-9]* of $2\$" "$1"
  fi
}
