#!/usr/bin/env bash
# Runs the GPU tests, then the GPU training test (from the repository), then a short training-step
# benchmark next to PyTorch's, and writes the results to a folder. Meant to finish within about 8 minutes
# (GPU_CHECK_TEST_TIMEOUT_S 240 s for the tests, GPU_CHECK_TRAIN_TIMEOUT_S 180 s for the training test,
# GPU_CHECK_BUDGET_S, default 480 s, for the whole check, which bounds the benchmarks).
#
#   scripts/gpu-check.sh [OUTDIR]     (default build/gpu-check; in a bundle: ./gpu-check)
#
# Works from the repository (build/bin/test_gpu, build/bin/bench_train_step, bench/pytorch_train_step.py)
# and from a bundle made by scripts/gpu-bundle.sh (bin/, lib/ and pytorch_train_step.py beside this
# script). cuDNN, cuBLAS, NCCL and the CUDA runtime are taken from LD_LIBRARY_PATH; only a library that ldd
# reports as not found is looked for in a Python's PyTorch CUDA wheels (their nvidia/*/lib folders, whose
# CUDA 12 copies must not shadow CUDA 13 ones found already). The summary says which copy of each was loaded.
# Benchmark: resnet50, 224x224, batch 64, 1000 classes, NCHW, at each precision in turn — fp32, tf32, bf16,
# fp16 (hetrain/precision.hpp; PyTorch: the TF32 flags, then autocast, with a GradScaler at fp16): hetrain's
# bench_train_step --device cuda --precision X and, with a Python whose torch sees a GPU (HETRAIN_PYTHON,
# python3, python, /usr/bin/python3: the first that does), pytorch_train_step.py --device cuda --precision X,
# alternating, each under `timeout`. Their times never fail the check, but a hetrain configuration that
# crashed, skipped or was left unmeasured by the budget does (fp16 comes last).
# Writes OUTDIR/summary.txt ("N passed, M failed, K skipped", the device, every RESULT line and one line per
# benchmark configuration: "resnet50 224 b64 precision=X: hetrain N img/s, PyTorch M img/s, ratio R"),
# OUTDIR/test_gpu.log, OUTDIR/test_gpu.xml (GoogleTest XML), OUTDIR/results.txt (the figures tests measure,
# e.g. NcclBench's allreduce figure: they append RESULT lines to $HETRAIN_GPU_RESULTS; then the
# benchmark lines) and OUTDIR/bench-step.log (the benchmark programs' own output).
# This check exists for GPU machines: it sets HETRAIN_REQUIRE_GPU=1, so that a process that sees no GPU
# (no driver, a container without the device, CUDA_VISIBLE_DEVICES="") FAILS every GPU test instead of
# skipping it, and so does test/e2e/train_gpu.sh. Multi-rank NCCL (NcclBench's bus bandwidth, the 2-rank
# run of train_gpu.sh) is exercised only where the machine has two GPUs or more.
# Exit status: 0 only when a GPU was seen, no GPU test failed, the training test passed and every hetrain
# benchmark configuration was measured; the summary's last line names each part that failed, did not run or
# skipped (PyTorch's side is the reference: its absence is reported, not failed).
set -uo pipefail
started=$SECONDS
budget=${GPU_CHECK_BUDGET_S:-480}
orig_ld_path=${LD_LIBRARY_PATH-}  # Python runs with this: the bundle's lib/ could shadow its own libraries
export LC_NUMERIC=C               # printf/awk read and write "812.5"
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/bin/test_gpu" ]; then      # bundle layout
  root=$here bin=$here/bin
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  out=${1:-$here/gpu-check}
  torch_bench=$here/pytorch_train_step.py
else                                      # repository layout (scripts/ inside the repository)
  root=$(cd "$here/.." && pwd) bin=$root/build/bin
  out=${1:-$root/build/gpu-check}
  torch_bench=$root/bench/pytorch_train_step.py
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

py() { LD_LIBRARY_PATH=$orig_ld_path "$@"; }

# A Python for the PyTorch side: the first candidate whose torch sees a CUDA device, else the first that
# imports torch at all (its SKIP line then says why PyTorch was not measured).
torch_py=""
for cand in ${HETRAIN_PYTHON:-} python3 python /usr/bin/python3; do
  command -v "$cand" >/dev/null 2>&1 || continue
  # exit 0: torch sees a GPU; 5: torch without a GPU; anything else: no usable torch
  py timeout 120 "$cand" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 5)' >/dev/null 2>&1
  case $? in
    0) torch_py=$cand; break ;;
    5) [ -n "$torch_py" ] || torch_py=$cand ;;
  esac
done

# PyTorch's CUDA libraries, where they exist (pip wheels: <site>/nvidia/<pkg>/lib, cu13/lib, torch/lib), from
# the Python chosen above or else the first one found. <site> is first the folder that holds torch itself
# (found without importing it), then every site folder that Python searches: the system ones
# (site-packages or Debian's dist-packages), the user's (pip install --user) and sysconfig's purelib.
site_dirs_py='
import importlib.util, os, site, sysconfig
dirs = []
try:
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        dirs.append(os.path.dirname(os.path.dirname(spec.origin)))
except Exception:
    pass
for get in (site.getsitepackages, lambda: [site.getusersitepackages()], lambda: [sysconfig.get_paths()["purelib"]]):
    try:
        dirs += list(get())
    except Exception:  # virtualenvs without site.getsitepackages
        pass
seen = set()
for d in dirs:
    if d and d not in seen and os.path.isdir(d):
        seen.add(d)
        print(d)
'
# The libraries ldd cannot find for our programs; a wheel folder is added only when it holds one of them.
not_found() {
  local f
  for f in "$bin/test_gpu" "$bin/bench_train_step"; do [ -x "$f" ] && ldd "$f" 2>&1; done |
    awk '/not found/ {print $1}' | sort -u
}
wanted=$(not_found)
if [ -n "$wanted" ]; then
  for cand in $torch_py python3 python; do
    command -v "$cand" >/dev/null 2>&1 || continue
    sites=$(py "$cand" -c "$site_dirs_py" 2>/dev/null) || continue
    while IFS= read -r site; do
      [ -n "$site" ] || continue
      for d in "$site"/nvidia/*/lib "$site"/torch/lib; do
        [ -d "$d" ] || continue
        holds=""
        for lib in $wanted; do [ -e "$d/$lib" ] && holds=1; done
        [ -n "$holds" ] || continue
        case ":${LD_LIBRARY_PATH-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d" ;; esac
      done
    done <<<"$sites"
    break
  done
fi
export LD_LIBRARY_PATH
failed_parts=()  # what the summary's last line names

summary=$out/summary.txt
{
  echo "hetrain gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not found"
  fi
  # Which copy of each GPU library the programs load.
  ldd "$bin/test_gpu" 2>/dev/null | awk '/libcud|libcublas|libnccl/ {print "loaded: " $1 " => " $3}'
} >"$summary"

if [ ! -x "$bin/test_gpu" ]; then
  echo "gpu-check: $bin/test_gpu is missing (make CUDA=1 build/bin/test_gpu, or run from a bundle)" | tee -a "$summary" >&2
  exit 1
fi
missing=$(ldd "$bin/test_gpu" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
if [ -n "$missing" ]; then
  echo "gpu-check: shared libraries not found: $missing(set LD_LIBRARY_PATH to their folders)" | tee -a "$summary" >&2
  exit 1
fi

# Tests that measure something (NcclBench) append their RESULT lines here.
export HETRAIN_GPU_RESULTS=$out/results.txt
: >"$HETRAIN_GPU_RESULTS"
# A GPU check that finds no GPU has failed (HETRAIN_REQUIRE_GPU=0 to see it skip instead, off a GPU machine).
export HETRAIN_REQUIRE_GPU=${HETRAIN_REQUIRE_GPU:-1}

timeout "${GPU_CHECK_TEST_TIMEOUT_S:-240}" "$bin/test_gpu" --gtest_output="xml:$out/test_gpu.xml" >"$out/test_gpu.log" 2>&1
rc=$?
p=$(grep -E '^\[  PASSED  \] [0-9]+' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
s=$(grep -E '^\[  SKIPPED \] [0-9]+' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
line="test_gpu: ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped (exit $rc)"
[ "${s:-0}" != 0 ] && line+="; skip reason: $(grep -m1 -A1 ': Skipped$' "$out/test_gpu.log" | tail -1)"
echo "$line" | tee -a "$summary"
nogpu=$(grep -m1 -oE 'HETRAIN_REQUIRE_GPU=1 but .*' "$out/test_gpu.log")
if [ -n "$nogpu" ]; then
  echo "gpu-check: FAILED: asked to check a GPU, but this process sees none (${nogpu#HETRAIN_REQUIRE_GPU=1 but })" \
    | tee -a "$summary" >&2
  rc=1
elif [ "${p:-0}" = 0 ] && [ "$HETRAIN_REQUIRE_GPU" != 0 ]; then
  echo "gpu-check: FAILED: no GPU test passed" | tee -a "$summary" >&2
  rc=1
fi
[ $rc -ne 0 ] && failed_parts+=("test_gpu (exit $rc, ${f:-0} failed)")
grep -E '^\[  FAILED  \] [A-Za-z]' "$out/test_gpu.log" | sort -u | tee -a "$summary"
grep -E '^RESULT' "$HETRAIN_GPU_RESULTS" | sed 's/^/  /' | tee -a "$summary"

# ---------------------------------------------------------------- training on the GPU, before the benchmarks
# From the repository, with MPI at hand: a real training run on the GPU(s) (test/e2e/train_gpu.sh: one GPU
# learns, GPU ranks match a CPU rank, a mixed CPU+GPU job keeps identical replicas). It runs before the
# benchmarks, with a time limit of its own, so that no benchmark can crowd it out; not run, skipped or failed,
# it fails the check. A bundle has no MPI: there it is reported as not run, and the check fails.
report() { echo "$1" | tee -a "$summary" "$HETRAIN_GPU_RESULTS"; }
if [ "$root" != "$here" ] && [ -x "$root/build/bin/hetrain" ] && command -v mpirun >/dev/null 2>&1; then
  timeout "${GPU_CHECK_TRAIN_TIMEOUT_S:-180}" bash "$root/test/e2e/train_gpu.sh" >"$out/train_gpu.log" 2>&1
  e2e=$?
  case $e2e in
    0) report "training on the GPU (test/e2e/train_gpu.sh): passed; $(grep -m1 'validation accuracy' "$out/train_gpu.log")" ;;
    77) report "training on the GPU: skipped ($(grep -m1 '^SKIP' "$out/train_gpu.log"))"; failed_parts+=("training (skipped)") ;;
    124|137) report "training on the GPU: FAILED: timed out after ${GPU_CHECK_TRAIN_TIMEOUT_S:-180} s"
             failed_parts+=("training (timed out)") ;;
    *) report "training on the GPU: FAILED (exit $e2e): $(grep -m1 '^FAIL' "$out/train_gpu.log")"; failed_parts+=("training (exit $e2e)") ;;
  esac
else
  report "training on the GPU: not run (needs the repository's build/bin/hetrain and mpirun; a bundle has neither)"
  failed_parts+=("training (not run)")
fi

# ---------------------------------------------------------------- training-step benchmark
# resnet50 224x224, batch 64, NCHW; fp32, tf32, bf16, fp16. Each configuration runs hetrain, then PyTorch,
# in their own processes. Steps and caps are small so that the four pairs fit the budget.
step_log=$out/bench-step.log
: >"$step_log"
bench_args=(--model resnet50 --size 224 --batch 64 --classes 1000 --device cuda
            --warmup "${BENCH_WARMUP:-3}" --steps "${BENCH_STEPS:-20}" --max-seconds "${BENCH_MAX_SECONDS:-15}")
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
# run_step NAME CMD... : runs one benchmark under timeout (at most 120 s, less when the budget is short);
# sets $m_line (its key=value line) or $m_why (why there is none).
run_step() {
  local name=$1; shift
  m_line="" m_why=""
  local left=$((budget - (SECONDS - started)))
  local cap=$((left < 120 ? left : 120))
  if [ "$cap" -lt 20 ]; then m_why="the check's time budget (${budget} s) is spent"; return; fi
  local t0=$SECONDS o rc
  echo "### $name: $*  (timeout ${cap} s)" >>"$step_log"
  o=$(timeout "$cap" "$@" 2>&1); rc=$?
  printf '%s\n### exit %s after %s s\n\n' "$o" "$rc" "$((SECONDS - t0))" >>"$step_log"
  m_line=$(grep -m1 '^impl=' <<<"$o")
  if [ $rc -eq 0 ] && [ -n "$m_line" ]; then return; fi
  m_line=""
  if [ $rc -eq 3 ] && grep -q '^SKIP' <<<"$o"; then m_why=$(grep -m1 '^SKIP' <<<"$o" | sed 's/^SKIP:* *//')
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then m_why="timed out after ${cap} s"
  else m_why="failed (exit $rc): $(grep -v '^\s*$' <<<"$o" | tail -1 | cut -c1-200)"; fi
}

hetrain_why=""
if [ ! -x "$bin/bench_train_step" ]; then
  hetrain_why="$bin/bench_train_step is not built (make build/bin/bench_train_step)"
else
  hmissing=$(ldd "$bin/bench_train_step" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
  [ -n "$hmissing" ] && hetrain_why="shared libraries not found: ${hmissing% }"
fi
torch_why=""
if [ ! -f "$torch_bench" ]; then torch_why="$torch_bench is missing"
elif [ -z "$torch_py" ]; then torch_why="no Python here imports torch (set HETRAIN_PYTHON)"
fi
for precision in fp32 tf32 bf16 fp16; do
  label="resnet50 224 b64 precision=$precision"
  h_line="" h_why=$hetrain_why p_line="" p_why=$torch_why
  if [ -z "$h_why" ]; then
    run_step "hetrain precision=$precision" "$bin/bench_train_step" "${bench_args[@]}" --precision "$precision"
    h_line=$m_line h_why=$m_why
  fi
  if [ -z "$p_why" ]; then
    run_step "pytorch precision=$precision" env LD_LIBRARY_PATH="$orig_ld_path" "$torch_py" "$torch_bench" \
      "${bench_args[@]}" --precision "$precision"
    p_line=$m_line p_why=$m_why
  fi
  h_ips=$(field samples_per_s "$h_line") p_ips=$(field samples_per_s "$p_line")
  line="$label: "
  if [ -n "$h_ips" ]; then line+="hetrain $(printf '%.1f' "$h_ips") img/s, "
  else line+="hetrain not measured: $h_why, "; failed_parts+=("benchmark $precision ($h_why)"); fi
  if [ -n "$p_ips" ]; then line+="PyTorch $(printf '%.1f' "$p_ips") img/s"; else line+="PyTorch not measured: $p_why"; fi
  if [ -n "$h_ips" ] && [ -n "$p_ips" ]; then
    line+=", ratio $(awk "BEGIN { printf \"%.2f\", $h_ips / $p_ips }")"
  fi
  mem=""
  [ -n "$h_line" ] && mem+=" hetrain $(field dev_mem_mb "$h_line") MB"
  [ -n "$p_line" ] && mem+="${mem:+,} PyTorch $(field dev_mem_mb "$p_line") MB"
  [ -n "$mem" ] && line+=" (GPU memory in use after the steps:$mem)"
  report "$line"
done
[ -n "$h_line$p_line" ] && echo "  (ratio = hetrain / PyTorch, > 1: hetrain faster; PyTorch: $(field impl "${p_line:-impl=-}"), python $torch_py; raw lines in $step_log)" >>"$summary"

echo "gpu-check: results in $out ($((SECONDS - started)) s)"
if [ ${#failed_parts[@]} -gt 0 ]; then
  msg="gpu-check: FAILED:"
  for part in "${failed_parts[@]}"; do msg+=" $part;"; done
  echo "${msg%;}" | tee -a "$summary" >&2
  exit 1
fi
echo "gpu-check: passed: GPU tests, training on the GPU and every benchmark configuration" | tee -a "$summary"
