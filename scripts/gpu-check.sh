#!/usr/bin/env bash
# Runs the GPU tests (and the GPU benchmarks when they are built) and writes the results to a folder.
#
#   scripts/gpu-check.sh [OUTDIR]     (default build/gpu-check; in a bundle: ./gpu-check)
#
# Works from the repository (build/bin/test_gpu) and from a bundle made by scripts/gpu-bundle.sh (bin/ and
# lib/ beside this script). cuDNN, cuBLAS, NCCL and the CUDA runtime are taken from LD_LIBRARY_PATH; when a
# Python with PyTorch's CUDA wheels is found, their nvidia/*/lib folders are appended to it.
# Writes OUTDIR/summary.txt ("N passed, M failed, K skipped", the device and every RESULT line),
# OUTDIR/test_gpu.log, OUTDIR/test_gpu.xml (GoogleTest XML), OUTDIR/results.txt (the figures tests measure,
# e.g. NcclBench's allreduce bandwidth: they append RESULT lines to $HETRAIN_GPU_RESULTS) and
# OUTDIR/bench*.log. Exit status: 0 when no test failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/bin/test_gpu" ]; then      # bundle layout
  root=$here bin=$here/bin
  export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  out=${1:-$here/gpu-check}
else                                      # repository layout (scripts/ inside the repository)
  root=$(cd "$here/.." && pwd) bin=$root/build/bin
  out=${1:-$root/build/gpu-check}
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# PyTorch's CUDA libraries, where they exist (pip wheels: site-packages/nvidia/<pkg>/lib, cu13/lib).
for py in python3 python; do
  command -v "$py" >/dev/null 2>&1 || continue
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null) || continue
  for d in "$site"/nvidia/*/lib "$site"/torch/lib; do
    [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
  done
  break
done
export LD_LIBRARY_PATH

summary=$out/summary.txt
{
  echo "hetrain gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not found"
  fi
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

timeout 300 "$bin/test_gpu" --gtest_output="xml:$out/test_gpu.xml" >"$out/test_gpu.log" 2>&1
rc=$?
p=$(grep -E '^\[  PASSED  \] [0-9]+' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
s=$(grep -E '^\[  SKIPPED \] [0-9]+' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
line="test_gpu: ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped (exit $rc)"
[ "${s:-0}" != 0 ] && line+="; skip reason: $(grep -m1 -A1 ': Skipped$' "$out/test_gpu.log" | tail -1)"
echo "$line" | tee -a "$summary"
grep -E '^\[  FAILED  \] [A-Za-z]' "$out/test_gpu.log" | sort -u | tee -a "$summary"
grep -E '^RESULT' "$HETRAIN_GPU_RESULTS" | sed 's/^/  /' | tee -a "$summary"

# Benchmarks (images/s of a resnet50 step, NCCL bus bandwidth) when their programs are built; they never
# fail the check on time.
for b in "$bin"/hetrain-bench-gpu*; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  timeout 240 "$b" >"$out/bench-$name.log" 2>&1
  echo "$name (exit $?):" >>"$summary"
  grep -E '^RESULT' "$out/bench-$name.log" | sed 's/^/  /' >>"$summary"
done

echo "gpu-check: results in $out"
[ $rc -eq 0 ]
