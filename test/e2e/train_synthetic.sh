#!/usr/bin/env bash
# Issue 2's acceptance run: resnet20 on synthetic data, one process; the loss must fall.
source "$(dirname "$0")/lib.sh"
$HETRAIN train --model resnet20 --synthetic 2048 --global-batch 64 --epochs 2 --lr 0.05 --log-every 8 \
  --metrics "$TMP/m.jsonl" | tee "$TMP/out.log" || fail "training exited non-zero"
grep -q "samples/s" "$TMP/out.log" || fail "no progress line with samples/s"
/usr/bin/python3 - "$TMP/m.jsonl" <<'PY' || fail "loss did not fall"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first = sum(r["loss"] for r in rows[:8]) / 8
last = sum(r["loss"] for r in rows[-8:]) / 8
print("mean loss of the first 8 steps %.4f, of the last 8 steps %.4f (%d steps)" % (first, last, len(rows)))
sys.exit(0 if len(rows) == 64 and last < 0.7 * first else 1)
PY
pass "resnet20 on synthetic data: the loss fell"
