#!/usr/bin/env bash
# A YOLOv5-style detector end to end (docs/detection.md): yolov5n.yaml trains on generated detection data in
# the synchronous mode on 1 and 2 ranks and in the asynchronous and hybrid modes; every epoch's validation
# reports COCO mAP; `hetrain eval` of the checkpoint on 1 and 3 ranks gives the trainer's own mAP; a
# classification dataset given to the detector, and a detection dataset given to a classifier, are refused
# with one line naming the file; so are augmentation options out of range or given to a classifier.
source "$(dirname "$0")/lib.sh"
[ -x "$PACK" ] || skip "$PACK not built"
F=/usr/share/datasets/fashion-mnist
[ -f $F/train-images-idx3-ubyte.gz ] || skip "dataset-fashion-mnist is not installed (make deps)"
GEN=(detect-synthetic --size 64 --max-items 2 --seed 5 --no-progress)
$PACK "${GEN[@]}" --count 64 --split train -o "$TMP/train.h5" >/dev/null || fail "packing the training split"
$PACK "${GEN[@]}" --count 24 --split test -o "$TMP/test.h5" >/dev/null || fail "packing the test split"
COMMON=(--model models/yolov5n.yaml --data "$TMP/train.h5" --val "$TMP/test.h5" --global-batch 16 --lr 0.01
        --device cpu)
MAP='mAP@0\.5 [0-9.]+, mAP@0\.5:0\.95 [0-9.]+'

# 1. Synchronous, 1 rank then 2 ranks with a checkpoint.
run_mpi 1 "${COMMON[@]}" --epochs 1 >"$TMP/one.out" 2>&1 || { cat "$TMP/one.out"; fail "1-rank training failed"; }
grep -qE "^epoch 1: validation loss [0-9.]+, $MAP \(24 samples\)" "$TMP/one.out" \
  || { cat "$TMP/one.out"; fail "no mAP validation line on 1 rank"; }
grep -qE "done: 4 steps.*val mAP@0\.5 [0-9.]+" "$TMP/one.out" || { cat "$TMP/one.out"; fail "no final mAP on 1 rank"; }
run_mpi 2 "${COMMON[@]}" --epochs 2 --checkpoint-dir "$TMP/ck" >"$TMP/two.out" 2>&1 \
  || { cat "$TMP/two.out"; fail "2-rank training failed"; }
val=$(grep -oE "^epoch 2: validation loss [0-9.]+, $MAP" "$TMP/two.out" | grep -oE 'mAP@0\.5 [0-9.]+' | head -1)
[ -n "$val" ] || { cat "$TMP/two.out"; fail "no epoch-2 mAP on 2 ranks"; }
echo "ok: trained on 1 and 2 ranks; 2 ranks after 2 epochs: $val"

# 2. hetrain eval: the same mAP as the trainer's validation, on 1 and on 3 ranks.
ck=$(ls "$TMP"/ck/checkpoint-*.h5 | tail -1)
timeout 120 mpirun -n 1 "$HETRAIN" eval --checkpoint "$ck" --data "$TMP/test.h5" --device cpu --quiet >"$TMP/e1" \
  || fail "eval on 1 rank failed"
timeout 120 mpirun -n 3 "$HETRAIN" eval --checkpoint "$ck" --data "$TMP/test.h5" --device cpu --quiet --batch 5 \
  >"$TMP/e3" || fail "eval on 3 ranks failed"
cat "$TMP/e1"
grep -qE '^samples 24  loss [0-9.]+  mAP@0\.5 [0-9.]+  mAP@0\.5:0\.95 [0-9.]+$' "$TMP/e1" || fail "unexpected eval line"
[ "$(cut -d' ' -f7- "$TMP/e1")" = "$(cut -d' ' -f7- "$TMP/e3")" ] || fail "1 and 3 ranks disagree: $(cat "$TMP/e3")"
grep -qF "$val" "$TMP/e1" || fail "eval's mAP differs from the trainer's ($val)"
# The mAP of so short a training may be 0; the loss pins that eval ran the trainer's final model.
tl=$(grep -oE "^epoch 2: validation loss [0-9.]+" "$TMP/two.out" | grep -oE '[0-9.]+$')
el=$(grep -oE 'loss [0-9.]+' "$TMP/e1" | grep -oE '[0-9.]+$')
awk -v a="$tl" -v b="$el" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * (a > 1 ? a : 1)) }' \
  || fail "eval's loss $el differs from the trainer's validation loss $tl"

# 3. The asynchronous and hybrid modes train the detector too.
for mode in async hybrid; do
  extra=(); [ $mode = hybrid ] && extra=(--groups 0,0)
  run_mpi 2 "${COMMON[@]}" --epochs 1 --mode $mode "${extra[@]}" >"$TMP/$mode.out" 2>&1 \
    || { cat "$TMP/$mode.out"; fail "$mode training failed"; }
  grep -qE "validation at sample .*: loss [0-9.]+, $MAP" "$TMP/$mode.out" \
    || { cat "$TMP/$mode.out"; fail "no mAP validation in $mode mode"; }
done
echo "ok: async and hybrid modes train and validate the detector"

# 4. The wrong kind of data: one line naming the file.
$PACK synthetic --count 32 --channels 1 --size 64 --classes 10 -o "$TMP/cls.h5" >/dev/null || fail "packing classes"
run_mpi 1 --model models/yolov5n.yaml --data "$TMP/cls.h5" --global-batch 8 --device cpu >"$TMP/o" 2>"$TMP/e" \
  && fail "a classification dataset was accepted by a detector"
grep -q "cls.h5: a classification dataset.*models/yolov5n.yaml needs a detection dataset" "$TMP/e" \
  || { cat "$TMP/e"; fail "unclear error for classification data"; }
run_mpi 1 --model lenet --data "$TMP/train.h5" --global-batch 8 --device cpu >"$TMP/o" 2>"$TMP/e" \
  && fail "a detection dataset was accepted by a classifier"
grep -q "train.h5: .*detection.*model lenet needs a classification dataset" "$TMP/e" \
  || { cat "$TMP/e"; fail "unclear error for detection data"; }

# 5. Augmentation options out of range, contradicting each other, or given to a classifier: one line each.
for args in "--mosaic 1.5" "--affine-scale 1" "--hsv-v -0.1" "--augment --no-augment" "--hsv-s 0.5 --no-augment"; do
  run_mpi 1 "${COMMON[@]}" --epochs 1 $args >"$TMP/o" 2>"$TMP/e" && fail "$args was accepted"
  [ "$(grep -c 'hetrain: error:' "$TMP/e")" -eq 1 ] && grep -q -- "${args%% *}" "$TMP/e" \
    || { cat "$TMP/e"; fail "$args: not one line naming ${args%% *}"; }
done
run_mpi 1 --model lenet --data "$TMP/cls.h5" --global-batch 8 --device cpu --mosaic 0.5 >"$TMP/o" 2>"$TMP/e" \
  && fail "--mosaic was accepted for a classifier"
grep -q "model lenet is a classifier: drop them" "$TMP/e" || { cat "$TMP/e"; fail "unclear error for --mosaic on a classifier"; }
for aug in --augment=rrc --augment; do  # a classifier's crops: refused, never ignored
  run_mpi 1 "${COMMON[@]}" $aug --epochs 1 >"$TMP/o" 2>"$TMP/e" && fail "$aug was accepted for a detector"
  [ "$(grep -c 'hetrain: error:' "$TMP/e")" -eq 1 ] && grep -q -- "${aug/=/ } is a classifier's recipe, and model .* is a detector" "$TMP/e" \
    || { cat "$TMP/e"; fail "unclear error for $aug on a detector"; }
done
pass "yolov5n trains on 1 and 2 ranks and in async/hybrid modes, eval reproduces the trainer's mAP ($val), wrong data and augmentation options are refused"
