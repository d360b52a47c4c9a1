#!/usr/bin/env bash
# 16-bit center trades in the asynchronous modes (--reduce-precision with --mode async|hybrid;
# docs/architecture.md, "16-bit center trades"): reads come from the shard owners' 16-bit copies, pushes go
# through their inboxes and are added in FP32 by the owners, which serve between layers and in every wait.
#  1. async at bf16 and fp16 and hybrid at bf16 (groups {0,1} {2,3}, --debug-consistency: replicas identical
#     inside a group), with unequal emulated speeds so that fast ranks wait (in the end's barrier, in the
#     group's broadcast) while slow ones still push: every run finishes, every sample once per epoch, and the
#     start-up line says what travels in 16 bits.
#  2. A stop signal checkpoints the FP32 center (every push is in it: a push returns once its owners added
#     it) and a resume on 2 ranks finishes the run; each sample is trained once per epoch across the stop.
#  3. --compress stays refused outside sync mode, in one line.
# (That the bytes on a link halve is measured across two network-namespace nodes: modes_netns.sh.)
source "$(dirname "$0")/lib.sh"
COMMON=(--model lenet --synthetic 500 --synthetic-shape 1,28,28 --global-batch 64 --epochs 2 --lr 0.05)
SPEEDS=(--emulate-speed 1,1,0.5,0.1)

check_once() {  # check_once EPOCHS SAMPLES FILES...: each (epoch, sample) exactly once
  /usr/bin/python3 - "$@" <<'PY'
import collections, sys
epochs, n = int(sys.argv[1]), int(sys.argv[2])
seen = collections.Counter()
for f in sys.argv[3:]:
    for line in open(f):
        if line.strip():
            seen[tuple(map(int, line.split()))] += 1
want = {(e, i) for e in range(epochs) for i in range(n)}
dup = sum(1 for c in seen.values() if c > 1)
print("  %d samples over %d epoch(s); duplicates %d, missing %d" % (sum(seen.values()), epochs, dup, len(want - set(seen))))
sys.exit(0 if set(seen) == want and dup == 0 else 1)
PY
}

# 1. Both modes, both formats.
for run in async-bf16 async-fp16 hybrid-bf16; do
  mode=${run%-*} wire=${run#*-}
  extra=(); [ $mode = hybrid ] && extra=(--groups 0,0,1,1 --debug-consistency)
  run_mpi 4 "${COMMON[@]}" --mode $mode "${extra[@]}" "${SPEEDS[@]}" --reduce-precision $wire --log-every 1000 \
    --dump-samples "$TMP/$run-%r.txt" >"$TMP/$run.out" 2>&1 || { cat "$TMP/$run.out"; fail "$run: training failed"; }
  grep -q "^done:" "$TMP/$run.out" || { cat "$TMP/$run.out"; fail "$run: no done line"; }
  grep -q "^elastic averaging: .*; center trades in $wire (reads from the owners' $wire copies, pushes through their inboxes), the center FP32" "$TMP/$run.out" \
    || { grep "^elastic" "$TMP/$run.out"; fail "$run: the start-up line does not say the trades travel in $wire"; }
  if [ $mode = hybrid ]; then
    grep -q "the center FP32, groups reduce in $wire" "$TMP/$run.out" || fail "$run: the start-up line does not say the groups reduce in $wire"
  fi
  echo "$run: $(grep '^done:' "$TMP/$run.out" | cut -c1-150)"
  check_once 2 500 "$TMP"/$run-[0-3].txt || fail "$run: samples not trained exactly once per epoch"
done

# 2. Stop, checkpoint, resume on another world size.
A=(--model lenet --synthetic 2048 --synthetic-shape 1,28,28 --global-batch 128 --epochs 2 --lr 0.05 --mode async
   --reduce-precision bf16 --log-every 1000)
stop_async "$TMP/stop.out" "$TMP/ck" "${A[@]}" --dump-samples "$TMP/cov-a-%r"; rc=$?
[ $rc -eq 75 ] || { cat "$TMP/stop.out"; fail "async bf16 run stopped by SIGUSR1: exit $rc, expected 75"; }
ls "$TMP"/ck/checkpoint-*.h5 >/dev/null 2>&1 || fail "no checkpoint after the stop"
run_mpi 2 "${A[@]}" --checkpoint-dir "$TMP/ck" --resume auto --dump-samples "$TMP/cov-b-%r" >"$TMP/resume.out" 2>&1 \
  || { cat "$TMP/resume.out"; fail "async bf16 resume failed"; }
resumed_from_stop "$TMP/resume.out" 4096 || { cat "$TMP/resume.out"; fail "the resumed run did not continue"; }
grep -q "^done: 32 step(s) of 128 samples" "$TMP/resume.out" || { cat "$TMP/resume.out"; fail "the resumed run did not finish"; }
echo "stop at $(sed -n 's/^stopped after \([0-9]*\) of .*/\1/p' "$TMP/stop.out"), resumed on 2 ranks:"
# Claims trained after the checkpoint's position and before the stop are trained again on resume (the
# checkpoint holds every push before that position): at most once more, never lost.
/usr/bin/python3 - "$TMP" <<'PY' || fail "a sample was lost across the stop and the resume"
import collections, glob, sys
seen = collections.Counter()
for f in glob.glob(sys.argv[1] + "/cov-*"):
    for line in open(f):
        if line.strip():
            seen[tuple(map(int, line.split()))] += 1
want = {(e, i) for e in range(2) for i in range(2048)}
print("  %d distinct of %d, %d trained twice (after the checkpoint, before the stop)" % (len(set(seen) & want), len(want), sum(1 for c in seen.values() if c > 1)))
sys.exit(0 if set(seen) == want and max(seen.values()) <= 2 else 1)
PY

# 3. PowerSGD is a sync-mode reduction.
out=$(run_mpi 2 "${COMMON[@]}" --mode async --compress powersgd:4 --quiet 2>&1) && fail "--compress in --mode async was accepted"
grep -q "compress applies to --mode sync only" <<<"$out" || fail "the async --compress refusal does not say why: $out"
pass "16-bit center trades: async and hybrid finish with every sample once, resume from a stop; --compress refused"
