#!/usr/bin/env bash
# What a user reads at the end of a run (README.md, "Training modes", its paragraph on errors; src/apps/hetrain_main.cpp):
#  - an error line leaves out the source location ([shared_step.cpp:N]) unless --verbose asks for it;
#  - a resume of a run that is already at its end says there was nothing left to train (sync and async),
#    instead of a rate and a loss of 0; one past a shorter run's end says so instead of "step 140 of 20";
#  - the words are true: "done: 1 step" with no rate for a run too short to time, "at the end only" for
#    checkpoints without an interval, --decode-threads capped with a note, a float option's value with every
#    digit it holds, "no such file" for a missing --init-from (and its source location with --verbose, an
#    error every rank agrees on included), a batch larger than --synthetic refused before the data is made;
#  - a stop signal exits 75 only after a checkpoint: without --checkpoint-dir it exits 76.
source "$(dirname "$0")/lib.sh"
BASE=(--model mlp --synthetic 64 --device cpu)
ARGS=("${BASE[@]}" --synthetic-shape 1,8,8 --global-batch 16 --max-steps 2)

failed_line() {  # failed_line ARGS...: the one error line of a run that fails
  "$HETRAIN" train "${ARGS[@]}" --quiet "$@" >"$TMP/fail.out" 2>&1 && fail "$*: exit 0"
  [ "$(grep -c '^hetrain: error: ' "$TMP/fail.out")" -eq 1 ] || { cat "$TMP/fail.out"; fail "$*: not one error line"; }
  grep '^hetrain: error: ' "$TMP/fail.out"
}
line=$(failed_line --debug-fail-at 0:1)
[ "$line" = "hetrain: error: rank 0 on $(hostname): failure injected by --debug-fail-at at step 1" ] \
  || fail "without --verbose: '$line'"
echo "ok  $line"
line=$(failed_line --debug-fail-at 0:1 --verbose)
[[ "$line" =~ ^"hetrain: error: rank 0 on $(hostname): failure injected by --debug-fail-at at step 1 ["[a-z_]+".cpp:"[0-9]+"]"$ ]] \
  || fail "with --verbose: '$line'"
echo "ok  $line"
"$HETRAIN" train "${ARGS[@]}" --verbose --print-config | grep -q '^verbose' && fail "--verbose is part of the printed configuration"

"$HETRAIN" train "${ARGS[@]}" --quiet --checkpoint-dir "$TMP/ck" || fail "the first run failed"
for mode in sync async; do
  "$HETRAIN" train "${ARGS[@]}" --mode $mode --checkpoint-dir "$TMP/ck" --resume auto >"$TMP/$mode.out" 2>&1 \
    || { cat "$TMP/$mode.out"; fail "$mode: the resume at the end failed"; }
  want=$([ $mode = sync ] && echo "step 2 of 2" || echo "sample 32 of 32")
  grep -qx "done: nothing left to train, the run was already at $want" "$TMP/$mode.out" \
    || { cat "$TMP/$mode.out"; fail "$mode: no 'nothing left to train' line"; }
  grep -q "samples/s" "$TMP/$mode.out" && { cat "$TMP/$mode.out"; fail "$mode: a rate for a run that trained nothing"; }
  echo "ok  $mode: $(grep '^done:' "$TMP/$mode.out")"
done
[ "$(ls "$TMP/ck")" = "checkpoint-00000002.h5" ] || fail "the resumes wrote checkpoints: $(ls "$TMP/ck")"
"$HETRAIN" train "${BASE[@]}" --synthetic-shape 1,8,8 --global-batch 16 --max-steps 40 --epochs 20 --quiet --checkpoint-dir "$TMP/past" || fail "the 40-step run failed"
"$HETRAIN" train "${ARGS[@]}" --epochs 20 --checkpoint-dir "$TMP/past" --resume auto >"$TMP/past.out" 2>&1 \
  || { cat "$TMP/past.out"; fail "the resume past the end failed"; }
grep -qx "resuming at step 40, past this run's last step 2: nothing left to train" "$TMP/past.out" \
  && grep -qx "done: nothing left to train, the checkpoint was at step 40, past this run's last step 2" "$TMP/past.out" \
  || { cat "$TMP/past.out"; fail "a resume past the run's end: not said so"; }
echo "ok  $(grep '^done:' "$TMP/past.out")"

"$HETRAIN" train "${BASE[@]}" --synthetic-shape 1,8,8 --global-batch 16 --max-steps 1 --checkpoint-dir "$TMP/one" --checkpoint-minutes 0 \
  --decode-threads 100000 >"$TMP/one.out" 2>&1 || { cat "$TMP/one.out"; fail "the 1-step run failed"; }
grep -qE "^done: 1 step, no rate \(the first step is not timed\), final train loss [0-9.]+$" "$TMP/one.out" \
  || { cat "$TMP/one.out"; fail "no 'done: 1 step' line"; }
grep -qx "checkpoints: $TMP/one, at the end only (and on a stop signal), newest 3 kept" "$TMP/one.out" \
  || { cat "$TMP/one.out"; fail "no 'at the end only' line"; }
grep -qE "^data: --decode-threads 100000 capped at [0-9]+, the cores of this node$" "$TMP/one.out" \
  || { cat "$TMP/one.out"; fail "--decode-threads 100000 not capped with a note"; }
echo "ok  $(grep -E '^(done|checkpoints|data):' "$TMP/one.out" | tr '\n' ';')"

line=$(failed_line --ema-decay 0.9999999999)
[[ "$line" == *"--ema-decay must be in [0, 1) (0: no moving average), got 1 (the nearest 32-bit float to the value given; the largest below 1 is 0.99999994)" ]] \
  || fail "--ema-decay 0.9999999999: '$line'"
echo "ok  $line"
line=$(failed_line --init-from "$TMP/nonexistent.h5")
[ "$line" = "hetrain: error: --init-from $TMP/nonexistent.h5: no such file" ] || fail "--init-from a missing file: '$line'"
echo "ok  $line"
line=$(failed_line --init-from "$TMP/nonexistent.h5" --verbose)
[[ "$line" =~ ^"hetrain: error: --init-from $TMP/nonexistent.h5: no such file ["[a-z_]+".cpp:"[0-9]+"]"$ ]] \
  || fail "--init-from a missing file with --verbose: '$line'"
echo "ok  $line"
start=$(date +%s)
"$HETRAIN" train "${BASE[@]}" --synthetic-shape 100000,16,16 --global-batch 128 >"$TMP/fail.out" 2>&1 && fail "64 samples, batch 128: exit 0"
line=$(grep '^hetrain: error: ' "$TMP/fail.out")
[[ "$line" == *"global batch 128 exceeds the 64 samples"* ]] && [ $(($(date +%s) - start)) -lt 10 ] \
  || fail "a batch larger than --synthetic with huge samples: '$line' after $(($(date +%s) - start)) s"
echo "ok  $line"

# A stop signal without --checkpoint-dir: no checkpoint, so not 75.
"$HETRAIN" train "${BASE[@]}" --synthetic-shape 1,8,8 --global-batch 16 --epochs 100000 --log-every 1 >"$TMP/stop.out" 2>&1 &
pid=$!
at_exit "kill -9 $pid 2>/dev/null"
for _ in $(seq 600); do grep -q "^step 3/" "$TMP/stop.out" 2>/dev/null && break; sleep 0.1; done
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 76 ] || { cat "$TMP/stop.out"; fail "a stop signal without --checkpoint-dir: exit $rc, expected 76"; }
grep -qE "^stopped after step [0-9]+ of [0-9]+ \(stop signal\); no checkpoint written \(no --checkpoint-dir\): exit status 76$" "$TMP/stop.out" || { cat "$TMP/stop.out"; fail "no 'stopped after' line"; }
echo "ok  SIGUSR1 without --checkpoint-dir: exit 76, $(grep '^stopped after' "$TMP/stop.out")"
pass "error lines carry their source location only with --verbose; a resume at the end or past it says nothing was left to train; the words are true; a stop without a checkpoint exits 76"
