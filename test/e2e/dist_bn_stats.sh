#!/usr/bin/env bash
# Batch-norm running statistics are averaged across ranks weighted by b_r/B before evaluation and before
# every checkpoint (README, "Training"):
#  - resnet20 on 2 ranks with the split 32,0 (rank 1 never sees a sample) and with 0,32 must hold exactly
#    the running statistics of 1 rank at batch 32: an unweighted average would mix in rank 1's untouched
#    initial statistics (mean 0, variance 1);
#  - with the split 16,16 every rank holds the same statistics after the average (--debug-consistency
#    compares them bit for bit), and they differ from the 1-rank ones (each rank saw other batches);
#  - the balancer never gives a rank of a batch-norm model a single sample: resnet18 on 32x32 images has
#    1x1 feature maps in layer4, where one sample is one value per channel, which batch norm cannot
#    normalize (a very slow rank at a small global batch used to get 1 and end the job).
source "$(dirname "$0")/lib.sh"
need_python h5py numpy
ARGS=(--model resnet20 --synthetic 192 --synthetic-shape 3,16,16 --global-batch 32 --max-steps 5 --lr 0.05
      --device cpu --quiet)
run_mpi 1 "${ARGS[@]}" --checkpoint-dir "$TMP/one" || fail "1-rank run failed"
run_mpi 2 "${ARGS[@]}" --split 32,0 --checkpoint-dir "$TMP/first" || fail "split 32,0 failed"
run_mpi 2 "${ARGS[@]}" --split 0,32 --checkpoint-dir "$TMP/second" || fail "split 0,32 failed"
run_mpi 2 "${ARGS[@]}" --split 16,16 --checkpoint-dir "$TMP/halves" --debug-consistency \
  || fail "split 16,16 with --debug-consistency failed (statistics differ between ranks?)"
/usr/bin/python3 - "$TMP" <<'PY' || fail "running statistics are not the b_r/B-weighted average"
import sys, h5py, numpy as np
tmp = sys.argv[1]
def stats(run):
    with h5py.File(f"{tmp}/{run}/checkpoint-00000005.h5", "r") as f:
        g = f["buffers"]
        return {k: g[k][()] for k in g if not k.endswith("num_batches_tracked")}
one = stats("one")
assert len(one) > 10, len(one)  # running mean and variance of every BN layer
for run in ("first", "second"):
    other = stats(run)
    bad = [k for k in one if not np.array_equal(one[k], other[k])]
    assert not bad, f"split {run}: {len(bad)} statistics differ from 1 rank, e.g. {bad[0]}"
halves = stats("halves")
diff = max(float(np.abs(one[k] - halves[k]).max()) for k in one)
assert diff > 0, "16,16 gave exactly the 1-rank statistics: the check cannot tell splits apart"
var = min(float(v.min()) for k, v in halves.items() if k.endswith("running_var"))
assert var > 0, "a running variance <= 0"
print(f"{len(one)} statistics: splits 32,0 and 0,32 equal 1 rank bit for bit; 16,16 differs by up to {diff:.3g}")
PY
run_mpi 2 --model resnet18 --synthetic 512 --synthetic-shape 3,32,32 --global-batch 8 --max-steps 40 --rebalance-every 2 \
  --emulate-speed 1,0.05 --device cpu --lr 0.01 --metrics "$TMP/m18.jsonl" --quiet >"$TMP/out18" 2>&1 \
  || { cat "$TMP/out18"; fail "resnet18 with a very slow rank failed"; }
splits=$(/usr/bin/python3 -c "
import json, sys
s = sorted({tuple(json.loads(l)['b']) for l in open('$TMP/m18.jsonl')})
print(s); sys.exit(1 if any(1 in b for b in s) else 0)") || fail "a rank was given one sample: $splits"
echo "resnet18, rank 1 at 5% speed, global batch 8: splits $splits"
pass "BN running statistics are the b_r/B-weighted average, identical on every rank; no one-sample shares"
