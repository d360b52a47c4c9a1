#!/usr/bin/env bash
# Bad input on several ranks: one clear line from rank 0, non-zero exit, no rank left waiting (timeout).
source "$(dirname "$0")/lib.sh"
check() {  # check NAME EXPECTED-TEXT ARGS...
  local name=$1 want=$2; shift 2
  timeout 120 mpirun -n 4 "$HETRAIN" train --model mlp --synthetic-shape 1,8,8 --max-steps 3 --quiet "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  local rc=$?
  [ $rc -ne 0 ] || fail "$name: exit code 0"
  [ $rc -ne 124 ] || fail "$name: hung (timeout)"
  local lines; lines=$(grep -c "hetrain: error:" "$TMP/$name.err")
  grep -q "hetrain: error:.*$want" "$TMP/$name.err" || { cat "$TMP/$name.err"; fail "$name: no error line containing '$want'"; }
  [ "$lines" -eq 1 ] || { cat "$TMP/$name.err"; fail "$name: $lines error lines, expected one"; }
  echo "ok  $name: $(grep "hetrain: error:" "$TMP/$name.err")"
}
S=(--synthetic 256)
check batch-below-ranks "smaller than the 4 ranks" "${S[@]}" --global-batch 3
check caps-wrong-length "max-local-batch" "${S[@]}" --global-batch 32 --max-local-batch 8,8,8
check caps-too-small "max-local-batch" "${S[@]}" --global-batch 32 --max-local-batch 4
check speed-zero "emulate-speed" "${S[@]}" --global-batch 32 --emulate-speed 1,1,0,1
check speeds-wrong-length "emulate-speed" "${S[@]}" --global-batch 32 --emulate-speed 1,0.5
check more-ranks-than-samples "global batch 4 exceeds the 3 samples" --synthetic 3 --global-batch 4
check split-wrong-sum "split" "${S[@]}" --global-batch 32 --split 1,2,3,4
check missing-data "nope.h5" --data "$TMP/nope.h5"
check diverged "NaN/Inf" "${S[@]}" --global-batch 32 --lr 1e12 --momentum 0
check bad-device "device must be" "${S[@]}" --global-batch 32 --device tpu
check negative-synthetic "--synthetic must be a positive number of samples, got -5" --synthetic -5 --global-batch 32
# A count whose epoch order cannot fit in memory (ulimit -v: "cannot fit" is the limit, and a regression
# cannot take the machine's memory) is refused before any allocation.
limit_kb=4000000
huge=$((limit_kb * 1024))  # 8 bytes of epoch order each: 8 times the limit
(ulimit -v $limit_kb; check huge-synthetic \
  "--synthetic $huge samples (the epoch order of every sample) needs about .* of memory, but only" \
  --synthetic $huge --global-batch 32) || exit 1
# A model file whose parameters cannot fit in memory is refused before they are allocated (under the same
# limit), naming the file; a huge repeat count is refused at once, not built for minutes.
printf 'nc: 2\nbackbone:\n  - [-1, 1, Conv, [8, 3, 2]]\n  - [-1, 1, Conv, [65536, 3, 1]]\n  - [-1, 1, Conv, [65536, 3, 1]]\nhead:\n  - [-1, 1, GlobalAvgPool, []]\n' >"$TMP/wide.yaml"
(ulimit -v $limit_kb; timeout 120 mpirun -n 4 "$HETRAIN" train --model "$TMP/wide.yaml" --synthetic 64 --global-batch 32 \
  --synthetic-shape 3,8,8 --max-steps 1 --quiet >"$TMP/wide.out" 2>"$TMP/wide.err")
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "model-too-big: exit $rc"
[ "$(grep -c "hetrain: error:" "$TMP/wide.err")" -eq 1 ] || { cat "$TMP/wide.err"; fail "model-too-big: not one error line"; }
grep -q "hetrain: error: $TMP/wide.yaml: the model (.* parameters, .* of layer outputs per sample) needs about .* of memory, but only" \
  "$TMP/wide.err" || { cat "$TMP/wide.err"; fail "model-too-big: unclear error"; }
echo "ok  model-too-big: $(grep "hetrain: error:" "$TMP/wide.err")"
sed 's/\[-1, 1, Conv, \[65536, 3, 1\]\]/[-1, 1000000000, C3, [128]]/' "$TMP/wide.yaml" >"$TMP/deep.yaml"
timeout 60 "$HETRAIN" models --show "$TMP/deep.yaml" >/dev/null 2>"$TMP/deep.err"
rc=$?
[ $rc -eq 1 ] || fail "deep.yaml: models --show exit $rc, want 1 (124: still building)"
grep -q "deep.yaml: backbone\[1\] (layer 1): number 1000000000 is out of range" "$TMP/deep.err" \
  || { cat "$TMP/deep.err"; fail "deep.yaml: unclear error"; }
echo "ok  huge-repeat: $(cat "$TMP/deep.err")"
check infinite-lr "--lr must be a finite number > 0, got inf" "${S[@]}" --global-batch 32 --lr inf
check nan-lr "--lr must be a finite number > 0, got nan" "${S[@]}" --global-batch 32 --lr nan
# Output paths are checked at start-up, not after training (the errors are agreed by all ranks, which
# only happens before the first step): a folder given as --metrics (no stray temporary file left beside
# it), --dump-params in a missing folder, --dump-samples that cannot be written.
mkdir -p "$TMP/metrics-dir"
check metrics-is-a-folder "--metrics $TMP/metrics-dir: not a regular file" "${S[@]}" --global-batch 32 \
  --metrics "$TMP/metrics-dir"
ls "$TMP" | grep -q 'metrics-dir.tmp' && fail "metrics-is-a-folder: a stray temporary file was left"
check params-missing-folder "--dump-params $TMP/no/such/p.bin: cannot write there" "${S[@]}" --global-batch 32 \
  --dump-params "$TMP/no/such/p.bin"
check samples-missing-folder "--dump-samples $TMP/no/such/s.0: cannot write" "${S[@]}" --global-batch 32 \
  --dump-samples "$TMP/no/such/s.%r"
"$HETRAIN" devices >/dev/null 2>&1 || check cuda-without-gpu "device cuda: no CUDA device" "${S[@]}" --global-batch 32 --device cuda
# Ranks that parsed different configurations fail fast, naming the rank that differs.
timeout 120 mpirun -n 3 bash -c 'exec '"$HETRAIN"' train --model mlp --synthetic 256 --synthetic-shape 1,8,8 \
  --max-steps 3 --quiet --global-batch 30 --seed $((OMPI_COMM_WORLD_RANK == 2 ? 7 : 1))' >"$TMP/cfg.out" 2>"$TMP/cfg.err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "config mismatch: exit $rc"
grep -q "hetrain: error:.*rank 2" "$TMP/cfg.err" || { cat "$TMP/cfg.err"; fail "config mismatch: rank 2 not named"; }
echo "ok  config-mismatch: $(grep "hetrain: error:" "$TMP/cfg.err" | head -1)"
pass "bad input on 4 ranks: one error line from rank 0, non-zero exit, no hang"
