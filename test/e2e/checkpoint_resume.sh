#!/usr/bin/env bash
# Checkpoints continue a run exactly (docs/checkpoint-format.md):
#  1. stopped after step k and resumed on the same ranks with the same split: bit-identical parameters to
#     an uninterrupted run (a control with another seed differs);
#  2. 4 ranks -> 2 ranks -> 3 ranks: the same result as 1 rank within fp32 reassociation error (lenet has
#     no batch norm), and every sample is trained on exactly once per epoch across both interruptions.
#     A shorter run than 1. and 3. (30 steps, not 60): another rank count sums the gradient in another
#     order, ~1e-7 apart, and over enough steps such a difference tips a max-pool tie or a ReLU at 0 the
#     other way, which moves a whole gradient element: on an AVX2 machine 2 ranks at 16+16 went from
#     1.2e-6 at step 20 to 3.7e-4 at step 30 of the 60-step run (13+19 too; 12+20 stayed at 7e-7) — no
#     resume involved. 30 steps of 320 samples stay at 1e-7 for every split tried, and a resume that
#     lost state (momentum, position, schedule) would differ by far more than the 1e-5 allowed;
#  3. a stop signal (SIGUSR1 to one rank) mid-run: every rank stops at the same step boundary, a checkpoint
#     is written, exit status 75; --resume auto then finishes bit-identical to the uninterrupted run.
source "$(dirname "$0")/lib.sh"
COMMON=(--model lenet --synthetic-shape 1,28,28 --global-batch 32 --epochs 3 --lr 0.05 --momentum 0.9
        --weight-decay 5e-4 --device cpu --quiet)
ARGS=(--synthetic 640 "${COMMON[@]}")

# 1. exact resume, same world and split
run_mpi 4 "${ARGS[@]}" --split 5,0,17,10 --dump-params "$TMP/full.bin" || fail "uninterrupted run failed"
run_mpi 4 "${ARGS[@]}" --split 5,0,17,10 --checkpoint-dir "$TMP/a" --stop-at-step 23 || fail "run stopped at 23 failed"
[ -f "$TMP/a/checkpoint-00000023.h5" ] || fail "no checkpoint-00000023.h5 after --stop-at-step 23: $(ls "$TMP/a")"
run_mpi 4 "${ARGS[@]}" --split 5,0,17,10 --checkpoint-dir "$TMP/a" --resume auto --dump-params "$TMP/resumed.bin" \
  || fail "resumed run failed"
cmp "$TMP/full.bin" "$TMP/resumed.bin" || fail "resumed parameters differ from the uninterrupted run's"
run_mpi 4 "${ARGS[@]}" --split 5,0,17,10 --seed 2 --dump-params "$TMP/other.bin" || fail "control run failed"
cmp -s "$TMP/full.bin" "$TMP/other.bin" && fail "control: another seed gave the same bits (the check cannot fail)"
echo "1. stopped at step 23 and resumed: bit-identical to the uninterrupted run"

# 2. 4 -> 2 -> 3 ranks against 1 rank, with sample coverage: 10 steps per epoch, stopped in epoch 0 and
#    at the first step of epoch 2
SHORT=(--synthetic 320 "${COMMON[@]}")
run_mpi 1 "${SHORT[@]}" --dump-params "$TMP/one.bin" || fail "1-rank run failed"
run_mpi 4 "${SHORT[@]}" --split 3,11,0,18 --checkpoint-dir "$TMP/b" --stop-at-step 8 \
  --dump-samples "$TMP/s1.%r" || fail "4-rank part failed"
run_mpi 2 "${SHORT[@]}" --checkpoint-dir "$TMP/b" --resume auto --stop-at-step 21 --balance none \
  --dump-samples "$TMP/s2.%r" || fail "2-rank part failed"
run_mpi 3 "${SHORT[@]}" --checkpoint-dir "$TMP/b" --resume auto --dump-params "$TMP/three.bin" \
  --dump-samples "$TMP/s3.%r" || fail "3-rank part failed"
float_compare "$TMP/one.bin" "$TMP/three.bin" 1e-5 || fail "4->2->3 ranks differ from 1 rank"
cat "$TMP"/s[123].* | /usr/bin/python3 -c '
import sys, collections
seen = collections.Counter(tuple(map(int, l.split())) for l in sys.stdin)
epochs = sorted({e for e, _ in seen})
n, steps = 320, 10  # 10 steps of 32 per epoch
for e in epochs:
    got = [i for (ee, i) in seen if ee == e]
    twice = [k for k, c in seen.items() if k[0] == e and c > 1]
    assert not twice, "epoch %d: samples trained on twice: %s" % (e, twice[:5])
    assert len(got) == steps * 32 and len(set(got)) == len(got), "epoch %d: %d samples" % (e, len(got))
assert epochs == [0, 1, 2], epochs
print("every sample once per epoch over 3 epochs and two interruptions")' || fail "sample coverage broken across the interruptions"
echo "2. 4 -> 2 -> 3 ranks: matches 1 rank; coverage exact"

# 3. a stop signal to one rank mid-run
SLOW=(--emulate-speed 0.05,1,1,1)  # rank 0 sleeps 19x its compute: the run lasts long enough to be hit
timeout 300 mpirun -n 4 "$HETRAIN" train "${ARGS[@]}" --split 5,0,17,10 "${SLOW[@]}" --checkpoint-dir "$TMP/c" \
  --checkpoint-every 4 >"$TMP/sig.out" 2>&1 &
launcher=$!
for _ in $(seq 300); do [ -f "$TMP/c/checkpoint-00000004.h5" ] && break; sleep 0.1; done
[ -f "$TMP/c/checkpoint-00000004.h5" ] || { kill $launcher; fail "no checkpoint at step 4 within 30 s"; }
ranks=()
for p in $(pgrep -f -- "--checkpoint-dir $TMP/c"); do  # the rank processes, not timeout or mpirun
  [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$HETRAIN")" ] && ranks+=("$p")
done
[ ${#ranks[@]} -eq 4 ] || { kill $launcher; fail "expected 4 rank processes under mpirun, found ${#ranks[@]}"; }
kill -USR1 "${ranks[2]}"
wait $launcher
rc=$?
cat "$TMP/sig.out" | grep -v '^$' | tail -3
[ $rc -eq 75 ] || fail "exit status $rc after SIGUSR1, expected 75"
last=$(ls "$TMP/c" | sort | tail -1)
step=$(echo "$last" | sed -E 's/checkpoint-0*([0-9]+)\.h5/\1/')
[ "$step" -gt 4 ] && [ "$step" -lt 60 ] || fail "stopped at an unexpected step: $last"
grep -q "stopped after step $step of 60 (stop signal)" "$TMP/sig.out" || fail "no 'stopped after step $step' line"
run_mpi 4 "${ARGS[@]}" --split 5,0,17,10 --checkpoint-dir "$TMP/c" --resume auto --dump-params "$TMP/sig.bin" \
  || fail "resume after the signal failed"
cmp "$TMP/full.bin" "$TMP/sig.bin" || fail "resumed after a signal: parameters differ from the uninterrupted run's"
pass "exact resume; 4->2->3 ranks within fp32 error with exact coverage; SIGUSR1 at step $step: exit 75, resumed bit-identically"
