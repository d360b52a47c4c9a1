#!/usr/bin/env bash
# What a user reads while training: progress lines with the step out of the total, the epoch fraction and
# an ETA; a one-line warning when the loss sits at chance level (ln K) for 100 steps (lenet at lr 0.3 here:
# at 0.1 it stays stuck on some machines and slowly learns on others, depending on the rounding),
# and none when the model learns; --quiet prints nothing at all, the device notice included.
source "$(dirname "$0")/lib.sh"
DIVERGING=(--model lenet --synthetic 8192 --synthetic-shape 1,28,28 --global-batch 64 --epochs 2 --lr 0.3
           --split 16,16,16,16 --log-every 20)
run_mpi 4 "${DIVERGING[@]}" >"$TMP/chance.out" 2>&1 || { cat "$TMP/chance.out"; fail "the lr 0.3 run failed"; }
grep -E '^step 40/256  epoch 0\.31/2  loss [0-9.]+  acc +[0-9.]+%  lr [0-9.e-]+ +[0-9.]+ samples/s  balance +[0-9.]+%  ETA [0-9hms]+(  reader-bound: data wait [0-9]+% of the step \(--decode-threads\))?$' \
  "$TMP/chance.out" >/dev/null || { grep '^step' "$TMP/chance.out" | head -3; fail "unexpected progress line"; }
[ "$(grep -c '^warning: the training loss has stayed at chance level (ln 10 = 2.303)' "$TMP/chance.out")" -eq 1 ] \
  || { grep '^step' "$TMP/chance.out"; fail "no single chance-level warning for a run stuck at ln 10"; }
run_mpi 4 "${DIVERGING[@]/0.3/0.02}" >"$TMP/learns.out" 2>&1 || fail "the lr 0.02 run failed"
grep -q "chance level" "$TMP/learns.out" && { grep '^step' "$TMP/learns.out"; fail "warned about a run that learns"; }
grep '^step 256/256' "$TMP/learns.out"
run_mpi 2 --model mlp --synthetic 64 --synthetic-shape 1,8,8 --global-batch 16 --epochs 1 --quiet >"$TMP/quiet.out" 2>&1 \
  || fail "quiet run failed"
[ ! -s "$TMP/quiet.out" ] || { cat "$TMP/quiet.out"; fail "--quiet printed something"; }
pass "progress shows step/total, epoch fraction and ETA; the chance-level warning comes once, only when stuck; --quiet is silent"
