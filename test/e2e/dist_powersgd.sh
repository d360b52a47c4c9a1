#!/usr/bin/env bash
# PowerSGD (--compress powersgd:R; docs/architecture.md, "PowerSGD"):
#  1. 4 ranks, split 5,0,17,10, --debug-consistency: the replicas stay identical after every compressed step,
#     also in small buckets overlapped with backward and with 16 bits on the wire.
#  2. --compress-start K: the K steps before are whole reductions, bit-identical to a run without --compress;
#     after them the parameters leave that run (the compression is real) but stay near it.
#  3. Exact resume: stopped after a compressed step and resumed on the same 4 ranks, bit-identical to the
#     uninterrupted run (the checkpoint carries Q and each rank's error feedback); resumed on 2 ranks, the
#     rows' sum goes to one rank and the result matches within FP32 reassociation.
#  4. The start-up line says what is sent and when (in buckets during backward, or after it); bad values, GPU-free limits and other modes are refused in one line.
source "$(dirname "$0")/lib.sh"
ARGS=(--model lenet --synthetic 640 --synthetic-shape 1,28,28 --global-batch 32 --epochs 1 --lr 0.05
      --momentum 0.9 --weight-decay 5e-4 --device cpu --quiet)
FOUR=(--split 5,0,17,10 --debug-consistency)

# 1 and 2
run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --max-steps 6 --dump-params "$TMP/whole6.bin" || fail "whole run failed"
run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --max-steps 6 --compress powersgd:2 --compress-start 6 --dump-params "$TMP/warm6.bin" \
  || fail "run with --compress-start 6 failed"
cmp "$TMP/whole6.bin" "$TMP/warm6.bin" || fail "the warm-up steps before --compress-start differ from whole reductions"
run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --dump-params "$TMP/whole.bin" || fail "whole 20-step run failed"
run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --compress powersgd:2 --compress-start 6 --dump-params "$TMP/full.bin" \
  || fail "PowerSGD run failed (replicas not identical?)"
cmp -s "$TMP/whole.bin" "$TMP/full.bin" && fail "PowerSGD gave the whole reduction's exact parameters: nothing was compressed"
float_compare "$TMP/whole.bin" "$TMP/full.bin" 0.2 || fail "PowerSGD strays far from the whole reduction"
# One bucket per few parameters, overlapped with backward, and 16 bits on the wire: still one replica.
run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --compress powersgd:2 --compress-start 6 --bucket-mb 0.01 --reduce-precision bf16 \
  --dump-params "$TMP/bf16.bin" || fail "PowerSGD in small buckets with --reduce-precision bf16 failed (replicas not identical?)"
float_compare "$TMP/whole.bin" "$TMP/bf16.bin" 0.2 || fail "PowerSGD in buckets on a bf16 wire strays far from the whole reduction"
echo "1-2. replicas identical every step (also in small buckets on a bf16 wire); warm-up bit-identical to whole reductions; compressed after it"

# 3. resume
run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --compress powersgd:2 --compress-start 6 --checkpoint-dir "$TMP/a" --stop-at-step 11 \
  || fail "run stopped at step 11 failed"
[ -f "$TMP/a/checkpoint-00000011.h5" ] || fail "no checkpoint-00000011.h5: $(ls "$TMP/a")"
run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --compress powersgd:2 --compress-start 6 --checkpoint-dir "$TMP/a" --resume auto \
  --dump-params "$TMP/resumed.bin" || fail "resumed run failed"
cmp "$TMP/full.bin" "$TMP/resumed.bin" || fail "resumed on 4 ranks: parameters differ from the uninterrupted run's"
rm "$TMP/a/checkpoint-00000020.h5"  # the resumed run's final checkpoint: the runs below resume from step 11 again
cp -r "$TMP/a" "$TMP/b"
cp -r "$TMP/a" "$TMP/c"
out=$(run_mpi 2 "${ARGS[@]}" --split 20,12 --compress powersgd:2 --compress-start 6 --checkpoint-dir "$TMP/b" --resume auto \
  --dump-params "$TMP/two.bin" 2>&1) || fail "resumed on 2 ranks failed: $out"
grep -q "resume: .*checkpoint-00000011.h5" <<<"$out" || fail "the 2-rank run did not resume from step 11: $out"
grep -q "error feedback of the checkpoint's 4 ranks is carried on by rank 0" <<<"$out" || fail "no note on the folded error: $out"
float_compare "$TMP/full.bin" "$TMP/two.bin" 1e-4 || fail "resumed on 2 ranks differs from the uninterrupted run"
# The control: the same checkpoint with its error feedback zeroed (checksum recomputed as
# docs/checkpoint-format.md shows) resumes to other parameters: the owed error matters, and is applied.
/usr/bin/python3 - "$TMP/c/checkpoint-00000011.h5" <<'PY' || fail "cannot zero the control's error feedback"
import sys, zlib, h5py
with h5py.File(sys.argv[1], "r+") as f:
    assert f["powersgd/error"].shape[0] == 4 and abs(f["powersgd/error"][...]).max() > 0
    f["powersgd/error"][...] = 0
    crc = 0
    for group in ("parameters", "buffers", "optimizer/momentum_buffer", "ema/parameters", "ema/buffers", "powersgd"):
        for name in (sorted(f[group].keys(), key=lambda s: s.encode()) if group in f else []):
            crc = zlib.crc32(f[group][name][()].tobytes(), crc)
    f.attrs.modify("checksum_crc32", crc)
PY
out=$(run_mpi 4 "${ARGS[@]}" "${FOUR[@]}" --compress powersgd:2 --compress-start 6 --checkpoint-dir "$TMP/c" --resume auto \
  --dump-params "$TMP/zeroed.bin" 2>&1) || fail "control resume failed: $out"
grep -q "resume: .*checkpoint-00000011.h5" <<<"$out" || fail "the control did not resume from step 11: $out"
cmp -s "$TMP/full.bin" "$TMP/zeroed.bin" && fail "control: resuming without the owed error gave the same bits (the check cannot fail)"
echo "3. resume: 4 ranks bit-identical, 2 ranks within 1e-4; without the owed error it differs"

# 4. messages
out=$(run_mpi 2 "${ARGS[@]/--quiet/--log-every=100}" --max-steps 2 --compress powersgd:4 2>&1) || fail "verbose run failed: $out"
grep -q "^gradients: mpi reduction, PowerSGD rank 4 in [0-9]* bucket(s) during backward: [0-9]* weight matrices ([0-9.]*% of the parameters) as factors, [0-9]* floats a step instead of 61706" <<<"$out" \
  || fail "the start-up line does not describe PowerSGD: $(grep gradients <<<"$out")"
out=$(run_mpi 2 "${ARGS[@]/--quiet/--log-every=100}" --max-steps 2 --compress powersgd:4 --bucket-mb 0 2>&1) || fail "--bucket-mb 0 run failed: $out"
grep -q "^gradients: mpi reduction, PowerSGD rank 4 after backward: " <<<"$out" \
  || fail "with --bucket-mb 0 the start-up line does not say PowerSGD runs after backward: $(grep gradients <<<"$out")"
for bad in powersgd:0 topk:4; do
  out=$(run_mpi 2 "${ARGS[@]}" --max-steps 2 --compress $bad 2>&1) && fail "--compress $bad was accepted"
  grep -q "^hetrain: error: --compress must be none or powersgd:R" <<<"$out" || fail "--compress $bad: no one-line error: $out"
done
out=$(run_mpi 2 "${ARGS[@]}" --max-steps 2 --mode async --compress powersgd:4 2>&1) && fail "--compress in --mode async was accepted"
grep -q "compress applies to --mode sync" <<<"$out" || fail "the async refusal does not say why: $out"
pass "PowerSGD keeps replicas identical, warms up whole, resumes exactly; its errors are one line"
