#!/usr/bin/env bash
# --accumulate N (docs/architecture.md, "Gradient accumulation"): N micro-batches of B, then one update.
# Without batch norm, B = 8 accumulated 4 times trains what B = 32 trains, on 1 rank and on 3 ranks with a
# fixed and a dynamic split, across a partial last step (micro-batches 8, 8, 4); with --bn sync resnet20
# and yolov5n (its loss's match counts per micro-batch) train the same on 1 rank and under a split, and a
# run stopped on 4 ranks and resumed on 2 equals 1 rank; in the asynchronous and hybrid modes B = 8
# accumulated twice trains what B = 16 trains; N < 1 is refused.
source "$(dirname "$0")/lib.sh"
[ -x "$PACK" ] || skip "$PACK not built"
TOL=1e-3

# 1. lenet, 212 samples, one epoch: 7 steps of 32, the last of 20.
LENET=(--model lenet --synthetic 212 --synthetic-shape 1,16,16 --epochs 1 --last-batch partial --lr 0.05 --momentum 0.9
       --quiet)
run_mpi 1 "${LENET[@]}" --global-batch 32 --dump-params "$TMP/b32.bin" || fail "B = 32 failed"
run_mpi 1 "${LENET[@]}" --global-batch 8 --accumulate 4 --dump-params "$TMP/acc1.bin" >"$TMP/acc1.out" \
  || fail "B = 8 x 4 on 1 rank failed"
run_mpi 3 "${LENET[@]}" --global-batch 8 --accumulate 4 --split 3,0,5 --dump-params "$TMP/acc3.bin" \
  || fail "B = 8 x 4 on 3 ranks failed"
run_mpi 3 "${LENET[@]}" --global-batch 8 --accumulate 4 --emulate-speed 1,0.5,1 --dump-params "$TMP/dyn.bin" \
  || fail "B = 8 x 4 on 3 ranks, dynamic split, failed"
for f in acc1 acc3 dyn; do
  float_compare "$TMP/b32.bin" "$TMP/$f.bin" 1e-5 || fail "lenet: $f differs from B = 32"
done
run_mpi 1 "${LENET[@]}" --global-batch 8 --dump-params "$TMP/b8.bin" || fail "B = 8 failed"
float_compare "$TMP/b32.bin" "$TMP/b8.bin" $TOL && fail "B = 8 without accumulation trained what B = 32 trains"
run_mpi 1 --model lenet --synthetic 212 --synthetic-shape 1,16,16 --last-batch partial --global-batch 8 --accumulate 4 \
  --max-steps 2 >"$TMP/line.out" 2>&1 || fail "the announced run failed"
grep -q "global batch 8 x 4 accumulated = 32 per step, 7 steps/epoch" "$TMP/line.out" \
  || { cat "$TMP/line.out"; fail "the start-up line does not say the step's batch"; }

# 2. Batch norm with sync statistics: each micro-batch's statistics are the same on 1 rank and under a split.
RES=(--model resnet20 --synthetic 256 --synthetic-shape 3,16,16 --global-batch 8 --accumulate 4 --max-steps 4
     --lr 0.02 --momentum 0.9 --bn sync --quiet)
run_mpi 1 "${RES[@]}" --dump-params "$TMP/res1.bin" || fail "resnet20 on 1 rank failed"
run_mpi 4 "${RES[@]}" --split 2,0,4,2 --dump-params "$TMP/res4.bin" || fail "resnet20 on 4 ranks failed"
float_compare "$TMP/res1.bin" "$TMP/res4.bin" $TOL || fail "resnet20 --bn sync --accumulate 4: split 2,0,4,2 differs"
$PACK detect-synthetic --size 64 --max-items 2 --seed 5 --no-progress --count 64 --split train -o "$TMP/det.h5" \
  >/dev/null || fail "packing detection data"
DET=(--model models/yolov5n.yaml --data "$TMP/det.h5" --global-batch 16 --accumulate 2 --epochs 2 --max-steps 2
     --device cpu --lr 0.01 --momentum 0.937 --bn sync --quiet)
run_mpi 1 "${DET[@]}" --dump-params "$TMP/det1.bin" || fail "yolov5n on 1 rank failed"
run_mpi 3 "${DET[@]}" --split 5,0,11 --dump-params "$TMP/det3.bin" || fail "yolov5n on 3 ranks failed"
float_compare "$TMP/det1.bin" "$TMP/det3.bin" $TOL || fail "yolov5n --accumulate 2: split 5,0,11 differs from 1 rank"

# 3. A checkpoint holds whole steps: 2 steps on 4 ranks, stopped, 2 more on 2 ranks equal 4 on 1 rank.
run_mpi 4 "${RES[@]}" --split 2,0,4,2 --checkpoint-dir "$TMP/ck" --stop-at-step 2 || fail "the 4-rank part failed"
run_mpi 2 "${RES[@]}" --split 5,3 --checkpoint-dir "$TMP/ck" --resume auto --dump-params "$TMP/resumed.bin" \
  || fail "the resumed 2-rank part failed"
float_compare "$TMP/res1.bin" "$TMP/resumed.bin" $TOL || fail "--accumulate 4: 4 -> 2 ranks differ from 1 rank"

# 4. The asynchronous and hybrid modes: a rank (a group) adds up the gradients of N claims before its update;
#    the schedule counts steps of N·B. Alone (async, 1 rank) or as one group of 2 (hybrid), B = 8 accumulated
#    twice trains what B = 16 trains, the run's last short claim included (200 samples). The group's members'
#    shares are the balancer's, different each run: the mean over the claims does not depend on them.
ELASTIC=(--model lenet --synthetic 200 --synthetic-shape 1,16,16 --lr 0.05 --momentum 0.9 --epochs 2 --quiet)
run_mpi 1 "${ELASTIC[@]}" --mode async --global-batch 16 --dump-params "$TMP/async16.bin" || fail "async B = 16 failed"
run_mpi 1 "${ELASTIC[@]}" --mode async --global-batch 8 --accumulate 2 --dump-params "$TMP/async8x2.bin" \
  || fail "async --accumulate 2 failed"
float_compare "$TMP/async16.bin" "$TMP/async8x2.bin" $TOL || fail "async: B = 8 accumulated twice differs from B = 16"
run_mpi 2 "${ELASTIC[@]}" --mode hybrid --groups 0,0 --global-batch 16 --dump-params "$TMP/hybrid16.bin" \
  || fail "hybrid B = 16 failed"
run_mpi 2 "${ELASTIC[@]}" --mode hybrid --groups 0,0 --global-batch 8 --accumulate 2 --dump-params "$TMP/hybrid8x2.bin" \
  || fail "hybrid --accumulate 2 failed"
float_compare "$TMP/hybrid16.bin" "$TMP/hybrid8x2.bin" $TOL || fail "hybrid: B = 8 accumulated twice differs from B = 16"
run_mpi 1 "${ELASTIC[@]}" --mode async --global-batch 8 --dump-params "$TMP/async8.bin" || fail "async B = 8 failed"
float_compare "$TMP/async16.bin" "$TMP/async8.bin" $TOL && fail "async B = 8 without accumulation matched B = 16: the comparison proves nothing"

# 5. Refused in one line.
for args in "--accumulate 0"; do
  run_mpi 2 --model lenet --synthetic 64 --synthetic-shape 1,16,16 --global-batch 16 $args >"$TMP/o" 2>"$TMP/e" \
    && fail "$args was accepted"
  [ "$(grep -c 'hetrain: error:' "$TMP/e")" -eq 1 ] && grep -q -- "--accumulate" "$TMP/e" \
    || { cat "$TMP/e"; fail "$args: not one line naming --accumulate"; }
done
pass "B = 8 accumulated 4 times equals B = 32 on 1 and 3 ranks (partial last step included); with --bn sync resnet20 and yolov5n are split-independent and resume from 4 to 2 ranks exactly; async and hybrid accumulate alike; N < 1 refused"
