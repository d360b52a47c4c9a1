#!/usr/bin/env bash
# 16-bit transport of the gradient sums (--reduce-precision bf16|fp16; docs/architecture.md, "16-bit transport"):
#  - 4 ranks, split 5,0,17,10 (a rank with b = 0), with --debug-consistency: the replicas stay identical after
#    every step, at both 16-bit formats, in one blocking reduction and in buckets started during backward.
#  - Each element is rounded, summed in FP32 in rank order and rounded once more whichever bucket holds it,
#    so one reduction after backward and several buckets give BIT-IDENTICAL parameters.
#  - The rounding is real: bf16 parameters differ from FP32's, but stay close (training goes the same way).
#  - The start-up line says what crosses the wire; a bad value is refused in one line. (The asynchronous
#    modes' 16-bit center trades: modes_reduce_precision.sh.)
source "$(dirname "$0")/lib.sh"
BASE=(--model lenet --synthetic 512 --synthetic-shape 1,28,28 --global-batch 32 --max-steps 12 --lr 0.05
      --momentum 0.9 --weight-decay 5e-4 --debug-consistency)
ARGS=("${BASE[@]}" --quiet --split 5,0,17,10)
run_mpi 4 "${ARGS[@]}" --dump-params "$TMP/fp32.bin" || fail "the FP32 run failed"
for wire in bf16 fp16; do
  for mb in 0 0.01; do
    run_mpi 4 "${ARGS[@]}" --reduce-precision "$wire" --bucket-mb "$mb" --dump-params "$TMP/$wire-$mb.bin" \
      || fail "--reduce-precision $wire, --bucket-mb $mb failed (replicas not identical?)"
  done
  cmp "$TMP/$wire-0.bin" "$TMP/$wire-0.01.bin" \
    || fail "--reduce-precision $wire: buckets give other parameters than one reduction after backward"
  cmp -s "$TMP/fp32.bin" "$TMP/$wire-0.bin" && fail "--reduce-precision $wire gives FP32's exact parameters: nothing was rounded"
  float_compare "$TMP/fp32.bin" "$TMP/$wire-0.bin" 2e-2 || fail "--reduce-precision $wire strays from FP32's parameters"
done
echo "bf16 and fp16: replicas identical every step; buckets bit-identical to one reduction; close to FP32"

out=$(run_mpi 2 "${BASE[@]}" --log-every 100 --split 20,12 --reduce-precision bf16 2>&1) || fail "verbose run failed: $out"
grep -q "^gradients: mpi reduction, 1 bucket(s) of about 25 MiB started during backward, bf16 on the wire" <<<"$out" \
  || fail "the start-up line does not say bf16 crosses the wire: $(grep gradients <<<"$out")"

out=$(run_mpi 2 "${BASE[@]}" --quiet --split 20,12 --reduce-precision int8 2>&1) && fail "--reduce-precision int8 was accepted"
[ "$(grep -c "reduce-precision" <<<"$out")" -ge 1 ] && grep -q "int8" <<<"$out" || fail "no error naming the option: $out"
pass "16-bit transport keeps replicas identical and buckets bit-identical; option errors are one line"
