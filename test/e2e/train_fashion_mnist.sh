#!/usr/bin/env bash
# First real training: pack Debian's Fashion-MNIST, train lenet for one epoch on 2 ranks with augmentation
# off, and require at least 80% test accuracy (lenet reaches ~85% after one epoch; chance is 10%). Also
# checks that the step rarely waits for data: from the --metrics lines (after 5 warm-up steps), the median
# over steps of the longest data wait of any rank stays under 25% of the median step time — a generous bound
# (about 2% is typical here) that a noisy machine does not cross, but a reader that cannot keep up does.
source "$(dirname "$0")/lib.sh"
SRC=/usr/share/datasets/fashion-mnist
[ -f $SRC/train-images-idx3-ubyte.gz ] || skip "dataset-fashion-mnist is not installed (make deps)"
$PACK idx --images $SRC/train-images-idx3-ubyte.gz --labels $SRC/train-labels-idx1-ubyte.gz -o "$TMP/train.h5" --no-progress || fail "pack train"
$PACK idx --images $SRC/t10k-images-idx3-ubyte.gz --labels $SRC/t10k-labels-idx1-ubyte.gz -o "$TMP/test.h5" --no-progress || fail "pack test"
run_mpi 2 --data "$TMP/train.h5" --val "$TMP/test.h5" --model lenet --global-batch 128 --epochs 1 --lr 0.05 \
  --warmup-epochs 0.1 --log-every 100 --metrics "$TMP/m.jsonl" | tee "$TMP/out.log" || fail "training failed"
/usr/bin/python3 - "$TMP" <<'PY' || fail "accuracy or data wait out of bounds"
import json, re, sys
tmp = sys.argv[1]
acc = float(re.findall(r"accuracy ([0-9.]+)%", open(tmp + "/out.log").read())[-1])
rows = [json.loads(l) for l in open(tmp + "/m.jsonl")][5:]
if len(rows) < 100 or any(len(r["wait_s"]) != 2 for r in rows):
    print("metrics: %d steps after warm-up, expected >= 100 with a data wait for each of the 2 ranks" % len(rows))
    sys.exit(1)
median = lambda v: sorted(v)[len(v) // 2]
waits, steps = [max(r["wait_s"]) for r in rows], [r["step_s"] for r in rows]
if not all(w >= 0 and s > 0 for w, s in zip(waits, steps)):  # also false for NaN
    print("metrics: a negative or NaN data wait, or a step of no time"); sys.exit(1)
share = median(waits) / median(steps)
print("test accuracy %.2f%% (need >= 80%%); steps waited for data %.2f%% of the time in total; median wait "
      "%.3g ms = %.2f%% of the median step %.3g ms (need < 25%%)"
      % (acc, 100 * sum(waits) / sum(steps), 1e3 * median(waits), 100 * share, 1e3 * median(steps)))
sys.exit(0 if acc >= 80.0 and share < 0.25 else 1)
PY
pass "lenet on Fashion-MNIST: test accuracy and data wait within bounds"
