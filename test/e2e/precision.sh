#!/usr/bin/env bash
# --precision on CPU ranks and the FP16 overflow handling (docs/precision.md). CPU ranks compute in FP32 at
# every precision (bit-identical to an FP32 run); --tf32 is the older spelling of --precision tf32; in an fp16
# job a step whose reduced gradient has NaN/Inf (here injected with --debug-overflow-at, as an FP16 overflow
# on a GPU rank would make it) is skipped on every rank — the parameters stay exactly those of the step
# before — the loss scale halves, the metrics say so, and a resume carries the scale on. Without fp16 the same
# NaN/Inf ends the job with one line. The GPU side (16-bit convolutions, parity with FP32) is in test/gpu.
source "$(dirname "$0")/lib.sh"
common=(--model lenet --synthetic 512 --synthetic-shape 1,28,28 --global-batch 64 --split 32,32 --quiet)

# 1. CPU ranks keep FP32: bf16, tf32 and fp16 jobs of CPU ranks train bit for bit as fp32.
run_mpi 2 "${common[@]}" --max-steps 4 --dump-params "$TMP/fp32.%r" >/dev/null 2>&1 || fail "fp32 run failed"
for p in bf16 fp16 tf32; do
  run_mpi 2 "${common[@]}" --max-steps 4 --precision $p --dump-params "$TMP/$p.%r" >"$TMP/$p.out" 2>&1 \
    || { cat "$TMP/$p.out"; fail "--precision $p failed on CPU ranks"; }
  cmp -s "$TMP/fp32.0" "$TMP/$p.0" || fail "--precision $p on CPU ranks changed the parameters"
  grep -q "precision: --precision $p applies to GPU ranks; this job has none, so it computes in FP32" "$TMP/$p.out" \
    || { cat "$TMP/$p.out"; fail "no note that a CPU-only job computes in FP32 at $p"; }
done
timeout 60 mpirun -n 2 "$HETRAIN" train --model lenet --synthetic 128 --synthetic-shape 1,28,28 --global-batch 64 \
  --max-steps 1 --precision bf16 --log-every 1 >"$TMP/table" 2>&1 || fail "bf16 run with a rank table failed"
grep -qE "^1	.*cpu \(.*\), fp32$" "$TMP/table" || { cat "$TMP/table"; fail "the rank table does not say CPU ranks keep fp32"; }

# 2. --tf32 still works, with a one-line note, and contradicting --precision is refused.
run_mpi 2 "${common[@]}" --max-steps 4 --tf32 --dump-params "$TMP/alias.%r" >"$TMP/alias.out" 2>"$TMP/alias.err" \
  || fail "--tf32 failed"
cmp -s "$TMP/fp32.0" "$TMP/alias.0" || fail "--tf32 on CPU ranks changed the parameters"
[ "$(grep -c 'note: --tf32 is the older spelling of --precision tf32' "$TMP/alias.err")" = 1 ] \
  || { cat "$TMP/alias.err"; fail "--tf32 did not print its note exactly once"; }
"$HETRAIN" train --synthetic 64 --tf32 --print-config >"$TMP/tf32.cfg" 2>/dev/null || fail "--print-config with --tf32 failed"
grep -qx "precision = tf32" "$TMP/tf32.cfg" && ! grep -q "^tf32" "$TMP/tf32.cfg" \
  || { cat "$TMP/tf32.cfg"; fail "--print-config does not write --tf32 as precision = tf32"; }
"$HETRAIN" train --config "$TMP/tf32.cfg" --print-config 2>&1 | cmp -s - "$TMP/tf32.cfg" \
  || fail "the printed configuration of a --tf32 run does not read back unchanged"
"$HETRAIN" train --synthetic 64 --tf32 --precision bf16 >"$TMP/both.out" 2>&1
[ $? -eq 2 ] || fail "--tf32 with --precision bf16 was not refused with exit code 2"
grep -q "error: --tf32 .* contradicts --precision bf16" "$TMP/both.out" || { cat "$TMP/both.out"; fail "unclear refusal"; }
"$HETRAIN" train --synthetic 64 --precision fp64 >"$TMP/bad.out" 2>&1
[ $? -eq 2 ] || fail "--precision fp64 was not refused with exit code 2"
grep -q "error: --precision: unknown precision 'fp64' (use fp32, tf32, bf16 or fp16)" "$TMP/bad.out" \
  || { cat "$TMP/bad.out"; fail "unclear error for --precision fp64"; }

# 3. fp16: an overflow at step 3 (the last of 4) is skipped on both ranks: the parameters equal those after
# step 2 (--stop-at-step 3 keeps the 4-step schedule), and the replicas stay identical.
run_mpi 2 "${common[@]}" --max-steps 4 --stop-at-step 3 --dump-params "$TMP/three.%r" >/dev/null 2>&1
[ $? -eq 0 ] || fail "the 3-step reference run failed"
! ls checkpoint-*.h5 >/dev/null 2>&1 || fail "--stop-at-step without --checkpoint-dir wrote a checkpoint into $(pwd)"
run_mpi 2 "${common[@]/--quiet/--log-every}" 1 --max-steps 4 --precision fp16 --debug-overflow-at 1:3 \
  --debug-consistency --metrics "$TMP/m.jsonl" --dump-params "$TMP/skip.%r" >"$TMP/skip.out" 2>&1 \
  || { cat "$TMP/skip.out"; fail "the fp16 run with an overflow failed"; }
grep -q "^step 3 (sync mode): FP16 gradient overflow (NaN/Inf after the reduction): step skipped, loss scale now 32768$" \
  "$TMP/skip.out" || { cat "$TMP/skip.out"; fail "no line for the skipped step"; }
grep -q "^fp16: 1 step(s) skipped for overflow, loss scale 32768$" "$TMP/skip.out" || fail "no fp16 summary line"
cmp -s "$TMP/three.0" "$TMP/skip.0" || fail "the skipped step changed the parameters"
cmp -s "$TMP/skip.0" "$TMP/skip.1" || fail "the replicas differ after a skipped step"
/usr/bin/python3 - "$TMP/m.jsonl" <<'PY' || fail "the metrics do not record the skipped step"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
got = [(r["step"], r["loss_scale"], r["skipped"]) for r in rows]
want = [(0, 65536, False), (1, 65536, False), (2, 65536, False), (3, 32768, True)]
print("metrics:", got)
sys.exit(0 if got == want else 1)
PY

# 4. Without fp16 the same NaN/Inf is divergence: one line, exit 1, no rank left waiting.
run_mpi 2 "${common[@]}" --max-steps 4 --debug-overflow-at 1:2 >"$TMP/div.out" 2>&1
rc=$?
[ $rc -ne 124 ] || fail "the job hung on a non-finite gradient"
[ $rc -eq 1 ] || { cat "$TMP/div.out"; fail "exit code $rc on a non-finite gradient at fp32 (want 1)"; }
grep -q "hetrain: error: step 2 (sync mode): the reduced gradient has [0-9]* NaN/Inf values (the loss diverged" "$TMP/div.out" \
  || { cat "$TMP/div.out"; fail "no divergence error line"; }

# 5. The loss scale travels in checkpoints: stopped after step 4 with the scale halved at step 2, the
# resumed run goes on at 32768.
run_mpi 2 "${common[@]}" --max-steps 8 --stop-at-step 5 --precision fp16 --debug-overflow-at 0:2 \
  --checkpoint-dir "$TMP/ck" >/dev/null 2>&1
[ $? -eq 0 ] || fail "the fp16 run to be resumed failed"
run_mpi 2 "${common[@]}" --max-steps 8 --precision fp16 --checkpoint-dir "$TMP/ck" --resume auto \
  --metrics "$TMP/resumed.jsonl" >/dev/null 2>&1 || fail "the fp16 resume failed"
first=$(head -1 "$TMP/resumed.jsonl" | /usr/bin/python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["step"], r["loss_scale"])')
[ "$first" = "5 32768" ] || fail "the resumed run's first step is '$first', want '5 32768' (step, loss scale)"

# 7. A skipped step leaves no trace in the batch-norm running statistics either: resnet20 stopped after an
# overflowing (skipped) step 2 holds the parameters and statistics of the same run stopped before it.
bn=(--model resnet20 --synthetic 256 --synthetic-shape 3,16,16 --global-batch 32 --split 16,16 --quiet --precision fp16)
run_mpi 2 "${bn[@]}" --max-steps 6 --stop-at-step 2 --checkpoint-dir "$TMP/bn2" >/dev/null 2>&1 || fail "bn run to step 2 failed"
run_mpi 2 "${bn[@]}" --max-steps 6 --stop-at-step 3 --debug-overflow-at 1:2 --checkpoint-dir "$TMP/bn3" >/dev/null 2>&1 \
  || fail "bn run with a skipped step 2 failed"
/usr/bin/python3 - "$TMP/bn2/checkpoint-00000002.h5" "$TMP/bn3/checkpoint-00000003.h5" <<'PY' || fail "a skipped step moved the model or its statistics"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as a, h5py.File(sys.argv[2], "r") as b:
    checked = 0
    for group in ("parameters", "buffers"):
        for name in a[group]:
            if name.endswith("num_batches_tracked"):
                continue  # counts steps, skipped ones included
            x, y = a[group][name][()], b[group][name][()]
            assert np.array_equal(x, y), "%s/%s differs after the skipped step (max %g)" % (group, name, abs(x - y).max())
            checked += 1
    assert checked > 60, checked
PY

# 6. async: rank 1 alone skips its overflowing local step; hybrid: both members of its group skip.
# Nothing makes an asynchronous rank take 3 local steps: on 2 busy cores one rank once trained a whole short
# epoch while the others were still in their first step. The others are emulated at half speed (they sleep,
# which leaves rank 1 the core) and the epoch is long enough for rank 1 to get there.
for mode in async hybrid; do
  speeds=$([ $mode = async ] && echo 0.5,1,0.5,0.5 || echo 1,1,0.5,0.5)
  extra=(); [ $mode = hybrid ] && extra=(--groups 0,0,1,1)
  run_mpi 4 --model lenet --synthetic 4096 --synthetic-shape 1,28,28 --global-batch 64 --mode $mode "${extra[@]}" \
    --emulate-speed $speeds --precision fp16 --debug-overflow-at 1:2 --log-every 2 --metrics "$TMP/$mode.jsonl" \
    >"$TMP/$mode.out" 2>&1 \
    || { cat "$TMP/$mode.out"; fail "$mode with an fp16 overflow failed"; }
  who=$([ $mode = async ] && echo "rank 1" || echo "group 0")
  grep -q "^$who, local step 2 ($mode mode, sample [0-9]* of the run): FP16 gradient overflow (NaN/Inf after the reduction): step skipped, loss scale now 32768" \
    "$TMP/$mode.out" || { cat "$TMP/$mode.out"; fail "$mode: no line for the skipped step of $who"; }
  grep -q "^fp16: 1 local step(s) skipped for overflow over all" "$TMP/$mode.out" || fail "$mode: no fp16 summary line"
  skipped=$(/usr/bin/python3 -c '
import json, sys
tot = None
for l in open(sys.argv[1]):
    s = json.loads(l)["skipped"]
    tot = s if tot is None else [a + b for a, b in zip(tot, s)]
print(",".join(str(int(x)) for x in tot))' "$TMP/$mode.jsonl")
  want=$([ $mode = async ] && echo 0,1,0,0 || echo 1,1,0,0)
  [ "$skipped" = "$want" ] || fail "$mode: skipped steps per rank in the metrics are $skipped, want $want"
done
pass "CPU ranks stay fp32 at bf16/fp16/tf32; --tf32 alias; fp16 overflow skipped alike on every rank (sync, async, hybrid), in the metrics and carried by a resume"
