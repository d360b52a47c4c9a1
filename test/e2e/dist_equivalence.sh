#!/usr/bin/env bash
# Invariant 1: a model with no batch-coupled layers trained k steps with the split (5, 0, 17, 10) on 4 ranks
# matches 1 rank with batch 32, parameter by parameter, within fp32 reassociation error. A control run with
# a different seed must NOT match (the comparison can fail).
source "$(dirname "$0")/lib.sh"
ARGS=(--model lenet --synthetic 512 --synthetic-shape 1,28,28 --global-batch 32 --max-steps 12 --lr 0.05
      --momentum 0.9 --weight-decay 5e-4 --quiet)
run_mpi 1 "${ARGS[@]}" --dump-params "$TMP/one.bin" || fail "1-rank run failed"
run_mpi 4 "${ARGS[@]}" --split 5,0,17,10 --dump-params "$TMP/four.bin" || fail "4-rank run failed"
float_compare "$TMP/one.bin" "$TMP/four.bin" 1e-5 || fail "4 ranks with split 5,0,17,10 differ from 1 rank"
run_mpi 1 "${ARGS[@]}" --seed 2 --dump-params "$TMP/other.bin" || fail "control run failed"
float_compare "$TMP/one.bin" "$TMP/other.bin" 1e-5 && fail "the comparison cannot tell different runs apart"
# With --augment a sample's crop and flip follow (seed, epoch, its dataset index), never its rank or its
# position in the local batch, so the split still changes nothing (20 steps: into the second epoch). The data
# is a packed file, read through the reader and prefetcher as every --data run is; a run without --augment
# must differ (the augmentation is really on).
$PACK synthetic --count 512 --channels 1 --size 28 --classes 10 -o "$TMP/aug.h5" --no-progress >/dev/null \
  || fail "packing the augmentation data failed"
AUG=(--model lenet --data "$TMP/aug.h5" --global-batch 32 --epochs 2 --max-steps 20 --lr 0.05 --momentum 0.9
     --weight-decay 5e-4 --quiet)
run_mpi 1 "${AUG[@]}" --augment --dump-params "$TMP/aug-one.bin" || fail "1-rank --augment run failed"
run_mpi 4 "${AUG[@]}" --augment --split 5,0,17,10 --dump-params "$TMP/aug-four.bin" || fail "4-rank --augment run failed"
float_compare "$TMP/aug-one.bin" "$TMP/aug-four.bin" 1e-5 \
  || fail "with --augment, 4 ranks with split 5,0,17,10 differ from 1 rank"
run_mpi 1 "${AUG[@]}" --dump-params "$TMP/aug-none.bin" || fail "run without --augment failed"
float_compare "$TMP/aug-one.bin" "$TMP/aug-none.bin" 1e-5 && fail "--augment changed nothing: its comparison proves nothing"
# A detector with every one of YOLOv5's augmentations on (mosaic, affine, HSV on colour images, flip; each
# sample's draws, its 3 mosaic partners included, keyed by seed, epoch and its dataset index): any split
# trains what 1 rank trains (sync statistics: yolov5n's batch norm couples the batch). 3 steps, the last in
# the second epoch (new draws). Without the augmentations the weights must differ.
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] \
  || skip "dataset-fashion-mnist is not installed (make deps): the detector part needs it"
$PACK detect-synthetic --size 64 --channels 3 --max-items 3 --seed 5 --count 64 --split train -o "$TMP/det.h5" \
  --no-progress >/dev/null || fail "packing the detection data failed"
DET=(--model models/yolov5n.yaml --data "$TMP/det.h5" --global-batch 32 --epochs 2 --max-steps 3 --device cpu
     --lr 0.01 --momentum 0.937 --bn sync --quiet --mosaic 1 --affine-scale 0.5 --affine-translate 0.1 --hsv-h 0.015
     --hsv-s 0.7 --hsv-v 0.4 --fliplr 0.5)
run_mpi 1 "${DET[@]}" --dump-params "$TMP/det-one.bin" || fail "1-rank augmented yolov5n run failed"
run_mpi 4 "${DET[@]}" --split 5,0,17,10 --dump-params "$TMP/det-four.bin" || fail "4-rank augmented yolov5n run failed"
float_compare "$TMP/det-one.bin" "$TMP/det-four.bin" 1e-3 \
  || fail "yolov5n with every augmentation on: 4 ranks with split 5,0,17,10 differ from 1 rank"
run_mpi 1 "${DET[@]}" --no-augment --dump-params "$TMP/det-none.bin" || fail "yolov5n --no-augment run failed"
float_compare "$TMP/det-one.bin" "$TMP/det-none.bin" 1e-3 && fail "the detector's augmentations changed nothing"
pass "equivalent within fp32 reassociation, with and without --augment, and for yolov5n with YOLOv5's augmentations; a different seed is told apart"
