#!/usr/bin/env bash
# First real training (issue 3): pack Debian's Fashion-MNIST, train lenet for one epoch on 2 ranks with
# augmentation off, and require at least 80% test accuracy (lenet reaches ~85% after one epoch; chance is
# 10%). Also checks that the step rarely waits for data.
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
wait = sum(max(r["wait_s"]) for r in rows) / sum(r["step_s"] for r in rows)
print("test accuracy %.2f%% (need >= 80%%); steps waited for data %.2f%% of the time" % (acc, 100 * wait))
sys.exit(0 if acc >= 80.0 else 1)
PY
