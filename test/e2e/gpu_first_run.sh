#!/usr/bin/env bash
# scripts/gpu-first-run.sh off a GPU machine: it must end fast with a non-zero exit, its summary must name
# every part with a status and a reason, and its last line must name each part that did not pass (a first run
# on a GPU machine must never look passed when a part failed or did not run). Skipped where a GPU answers:
# there the script is the real 9-minute run (make gpu-first-run).
source "$(dirname "$0")/lib.sh"
# The per-test parity table of the gpu-tests part, on results of the format test/gpu/gpu_test_util.hpp writes
# (a rehearsal on the host emulation of CUDA found its awk rejected by mawk: a bare > inside printf).
(
  source scripts/gpu-lib.sh
  printf '%s\n' 'RESULT parity test=CudaRelu.Parity what="out" n=10 max_abs=2e-07 max_rel=1e-07 tol_frac=0.25 ok=1' \
    'RESULT parity test=CudaRelu.Parity what="din in place" n=10 max_abs=3e-07 max_rel=4e-07 tol_frac=0.5 ok=1' \
    'RESULT parity test=CudaConv.Odd what="dweight" n=5 max_abs=1 max_rel=2 tol_frac=inf ok=0' >"$TMP/results.txt"
  printf '%s\n' '[       OK ] CudaRelu.Parity (3 ms)' '[  FAILED  ] CudaConv.Odd (9 ms)' \
    '[  SKIPPED ] CudaDevice.CpuBuildStubsThrow (0 ms)' '[  FAILED  ] 1 test, listed below:' >"$TMP/test_gpu.log"
  gpu_parity_table "$TMP/results.txt" "$TMP/test_gpu.log" >"$TMP/table.txt" 2>&1
) || fail "gpu_parity_table failed: $(cat "$TMP/table.txt")"
cat "$TMP/table.txt"
grep -qx '  passed  CudaRelu.Parity: 2 comparisons with the CPU twin, max |gpu-cpu| 3e-07, max rel 4e-07, worst 0.5 of the tolerance ("din in place")' "$TMP/table.txt" \
  || fail "the parity table's line for a passed test is wrong"
grep -qx '  FAILED  CudaConv.Odd: 1 comparisons with the CPU twin, max |gpu-cpu| 1, max rel 2, worst inf of the tolerance ("dweight")' "$TMP/table.txt" \
  || fail "the parity table's line for a failed test is wrong"
grep -qx '  SKIPPED CudaDevice.CpuBuildStubsThrow: no CPU-twin figures (checks behaviour)' "$TMP/table.txt" \
  || fail "the parity table's line for a test without figures is wrong"
[ "$(wc -l <"$TMP/table.txt")" = 3 ] || fail "the parity table has lines besides the three tests'"

[ -x "$HETRAIN" ] || fail "$HETRAIN is missing: run make"
"$HETRAIN" devices >/dev/null 2>&1 && skip "a GPU is here: run make gpu-first-run for the real first run"
start=$SECONDS
HETRAIN_REQUIRE_GPU=1 GPU_TORCH_PROBE_TIMEOUT_S=20 timeout 120 scripts/gpu-first-run.sh "$TMP/out" >"$TMP/run.log" 2>&1
rc=$?
took=$((SECONDS - start))
[ $rc -ne 124 ] || fail "gpu-first-run.sh did not finish within 120 s without a GPU"
[ $rc -ne 0 ] || { cat "$TMP/run.log"; fail "gpu-first-run.sh exited 0 on a machine without a GPU"; }
s=$TMP/out/summary.txt
[ -s "$s" ] || fail "no summary file"
parts="versions gpu-tests resnet20 mixed rebalance-memory yolov5n memcheck resnet50"
last=$(tail -1 "$s")
[[ "$last" == "gpu-first-run: FAILED: "* ]] || { cat "$s"; fail "the last line does not say FAILED: $last"; }
for p in $parts; do
  line=$(grep -m1 -E "^  $p: " "$s") || { cat "$s"; fail "the summary's parts table has no line for $p"; }
  status=${line#  $p: }
  [[ "$status" =~ ^(FAILED|NOT\ RUN|SKIPPED)\ \(.+\)$ ]] || { cat "$s"; fail "$p: '$status' is not a failed/not-run status with a reason"; }
  [[ "$last" == *"$p: $status"* ]] || { cat "$s"; fail "the last line does not name $p ($status)"; }
done
[ "$(grep -c '^part ' "$s")" = 8 ] || { cat "$s"; fail "expected 8 part lines"; }
echo "gpu-first-run.sh without a GPU: exit $rc after $took s; $last" | cut -c1-300
pass "gpu-first-run.sh fails fast without a GPU and names every part that did not pass; its parity table reads test_gpu's results"
