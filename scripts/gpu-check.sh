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
source "$(dirname "$0")/gpu-lib.sh"   # layout, PyTorch's Python and libraries, test_gpu, benchmarks
gpu_layout gpu-check
out=${1:-$default_out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
gpu_find_torch_python
gpu_add_wheel_libs "$bin/test_gpu" "$bin/bench_train_step"
failed_parts=()  # what the summary's last line names

summary=$out/summary.txt
gpu_header "hetrain gpu-check" >"$summary"

if [ ! -x "$bin/test_gpu" ]; then
  echo "gpu-check: $bin/test_gpu is missing (make CUDA=1 build/bin/test_gpu, or run from a bundle)" | tee -a "$summary" >&2
  exit 1
fi
missing=$(missing_libs "$bin/test_gpu")
if [ -n "$missing" ]; then
  echo "gpu-check: shared libraries not found: $missing(set LD_LIBRARY_PATH to their folders)" | tee -a "$summary" >&2
  exit 1
fi

# Tests that measure something (NcclBench) append their RESULT lines here.
export HETRAIN_GPU_RESULTS=$out/results.txt
: >"$HETRAIN_GPU_RESULTS"
# A GPU check that finds no GPU has failed (HETRAIN_REQUIRE_GPU=0 to see it skip instead, off a GPU machine).
export HETRAIN_REQUIRE_GPU=${HETRAIN_REQUIRE_GPU:-1}

gpu_run_tests "$out" "${GPU_CHECK_TEST_TIMEOUT_S:-240}"
rc=$gt_rc
echo "$gt_line" | tee -a "$summary"
[ -n "$gt_why" ] && echo "gpu-check: FAILED: $gt_why" | tee -a "$summary" >&2
[ $rc -ne 0 ] && failed_parts+=("test_gpu (exit $rc, $gt_failed failed)")
grep -E '^\[  FAILED  \] [A-Za-z]' "$out/test_gpu.log" | sort -u | tee -a "$summary"
grep -E '^RESULT' "$HETRAIN_GPU_RESULTS" | grep -v '^RESULT parity ' | sed 's/^/  /' | tee -a "$summary"

# ---------------------------------------------------------------- training on the GPU, before the benchmarks
# From the repository, with MPI at hand: a real training run on the GPU(s) (test/e2e/train_gpu.sh: one GPU
# learns, GPU ranks match a CPU rank, a mixed CPU+GPU job keeps identical replicas). It runs before the
# benchmarks, with a time limit of its own, so that no benchmark can crowd it out; not run, skipped or failed,
# it fails the check. From a bundle (no test/e2e) it is reported as not run, and the check fails.
report() { echo "$1" | tee -a "$summary" "$HETRAIN_GPU_RESULTS"; }
if [ "$root" != "$here" ] && [ -x "$root/build/bin/hetrain" ] && command -v mpirun >/dev/null 2>&1; then
  timeout -k 10 "${GPU_CHECK_TRAIN_TIMEOUT_S:-180}" bash "$root/test/e2e/train_gpu.sh" >"$out/train_gpu.log" 2>&1
  e2e=$?
  case $e2e in
    0) report "training on the GPU (test/e2e/train_gpu.sh): passed; $(grep -m1 'validation accuracy' "$out/train_gpu.log")" ;;
    77) report "training on the GPU: skipped ($(grep -m1 '^SKIP' "$out/train_gpu.log"))"; failed_parts+=("training (skipped)") ;;
    124|137) report "training on the GPU: FAILED: timed out after ${GPU_CHECK_TRAIN_TIMEOUT_S:-180} s"
             failed_parts+=("training (timed out)") ;;
    *) report "training on the GPU: FAILED (exit $e2e): $(grep -m1 '^FAIL' "$out/train_gpu.log")"; failed_parts+=("training (exit $e2e)") ;;
  esac
else
  report "training on the GPU: not run (needs the repository's test/e2e/train_gpu.sh, build/bin/hetrain and mpirun; from a bundle, gpu-first-run.sh trains instead)"
  failed_parts+=("training (not run)")
fi

# ---------------------------------------------------------------- training-step benchmark
# resnet50 224x224, batch 64, NCHW; fp32, tf32, bf16, fp16. Each configuration runs hetrain, then PyTorch,
# in their own processes. Steps and caps are small so that the four pairs fit the budget.
step_log=$out/bench-step.log
: >"$step_log"
gpu_resnet50_bench
failed_parts+=(${bench_failed[@]+"${bench_failed[@]}"})
[ -n "$bench_note" ] && echo "$bench_note" >>"$summary"

echo "gpu-check: results in $out ($((SECONDS - started)) s)"
if [ ${#failed_parts[@]} -gt 0 ]; then
  msg="gpu-check: FAILED:"
  for part in "${failed_parts[@]}"; do msg+=" $part;"; done
  echo "${msg%;}" | tee -a "$summary" >&2
  exit 1
fi
echo "gpu-check: passed: GPU tests, training on the GPU and every benchmark configuration" | tee -a "$summary"
