#!/usr/bin/env bash
# What a user reads at the end of a run (README.md, "Errors"; src/apps/hetrain_main.cpp):
#  - an error line leaves out the source location ([shared_step.cpp:N]) unless --verbose asks for it;
#  - a resume of a run that is already at its end says there was nothing left to train (sync and async),
#    instead of a rate and a loss of 0.
source "$(dirname "$0")/lib.sh"
ARGS=(--model mlp --synthetic 64 --synthetic-shape 1,8,8 --global-batch 16 --max-steps 2 --device cpu)

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
pass "error lines carry their source location only with --verbose; a resume at the end says nothing was left to train"
