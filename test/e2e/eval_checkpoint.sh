#!/usr/bin/env bash
# hetrain eval: a checkpoint evaluated on 1 rank and on 3 ranks gives the same loss, top-1 and top-5 over
# every sample, and the same top-1 as the trainer's own validation at the end of training; top-5 is shown
# only with at least 5 classes; bad input is one line.
source "$(dirname "$0")/lib.sh"
# Training data doubles as the evaluation set here (the synthetic classes are learnable within one seed).
"$PACK" synthetic --count 300 --channels 1 --size 28 --classes 10 --seed 3 -o "$TMP/val.h5" >/dev/null \
  || fail "packing the data failed"
cp "$TMP/val.h5" "$TMP/train.h5"
run_mpi 2 --model lenet --data "$TMP/train.h5" --val "$TMP/val.h5" --global-batch 32 --epochs 2 --lr 0.05 \
  --device cpu --checkpoint-dir "$TMP/ck" >"$TMP/train.out" 2>&1 || { cat "$TMP/train.out"; fail "training failed"; }
ck=$(ls "$TMP"/ck/checkpoint-*.h5 | tail -1)
val=$(grep -oE 'epoch 2: validation loss [0-9.]+, accuracy [0-9.]+%' "$TMP/train.out" | grep -oE '[0-9.]+%')
[ -n "$val" ] || fail "no validation line from training"
timeout 120 mpirun -n 1 "$HETRAIN" eval --checkpoint "$ck" --data "$TMP/val.h5" --device cpu --quiet >"$TMP/one" \
  || fail "eval on 1 rank failed"
timeout 120 mpirun -n 3 "$HETRAIN" eval --checkpoint "$ck" --data "$TMP/val.h5" --device cpu --quiet --batch 37 >"$TMP/three" \
  || fail "eval on 3 ranks failed"
cat "$TMP/one"
grep -qE '^samples 300  loss [0-9.]+  top-1 [0-9.]+%  top-5 [0-9.]+%$' "$TMP/one" || fail "unexpected result line"
# Sums over other groupings round differently in the last digits of the loss; top-1 and top-5 are counts.
cut -d' ' -f1-2,7- "$TMP/one" >"$TMP/one.counts"; cut -d' ' -f1-2,7- "$TMP/three" >"$TMP/three.counts"
cmp -s "$TMP/one.counts" "$TMP/three.counts" || fail "1 rank and 3 ranks disagree: $(cat "$TMP/three")"
grep -q "top-1 $val" "$TMP/one" || fail "eval's top-1 differs from the trainer's validation accuracy $val"
# fewer than 5 classes: no top-5
run_mpi 1 --model mlp --synthetic 64 --synthetic-shape 1,8,8 --synthetic-classes 3 --global-batch 16 --epochs 1 \
  --device cpu --quiet --checkpoint-dir "$TMP/ck3" || fail "3-class training failed"
"$HETRAIN" eval --checkpoint "$TMP/ck3/checkpoint-00000004.h5" --synthetic 40 --device cpu --quiet >"$TMP/small" \
  || fail "3-class eval failed"
grep -q "top-5" "$TMP/small" && fail "top-5 shown with 3 classes: $(cat "$TMP/small")"
# bad input
"$HETRAIN" eval --checkpoint "$ck" --data "$TMP/nothing.h5" --device cpu >"$TMP/out" 2>"$TMP/err" && fail "missing data accepted"
grep -q "nothing.h5" "$TMP/err" || fail "the error does not name the missing file: $(cat "$TMP/err")"
"$HETRAIN" eval --checkpoint "$TMP/ck3/checkpoint-00000004.h5" --data "$TMP/val.h5" --device cpu >"$TMP/out" 2>"$TMP/err" \
  && fail "a dataset of another shape accepted"
grep -q "but the checkpoint's mlp was trained on 1x8x8 with 3 classes" "$TMP/err" || fail "unclear mismatch: $(cat "$TMP/err")"
# A negative count is an option error (exit 2), named as such, not "no data".
"$HETRAIN" eval --checkpoint "$ck" --synthetic -100 --device cpu >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 2 ] || { cat "$TMP/err"; fail "--synthetic -100: exit $rc, want 2 (a bad option)"; }
[ "$(grep -c 'hetrain: error' "$TMP/err")" -eq 1 ] && grep -q "hetrain: error: --synthetic must be a positive number of samples, got -100" \
  "$TMP/err" || { cat "$TMP/err"; fail "--synthetic -100: unclear error"; }
pass "eval on 1 and 3 ranks agrees ($(cat "$TMP/one")), matches the trainer's validation, refuses bad input"
