#!/usr/bin/env bash
# The metrics' memory figures (docs/report.md): one per rank, in every mode, following that rank's own
# batch. Two ranks with a fixed split of 8 and 120 samples: the one with 120 holds activations for 15 times
# the samples, so its resident peak must be clearly the higher (resnet20 at 32×32 keeps a few MiB per
# sample for backward). CPU ranks allocate nothing on a device: device_mib and device_peak_mib are 0, and the
# run's "memory:" line has no GPU part.
source "$(dirname "$0")/lib.sh"
ARGS=(--model resnet20 --synthetic 1024 --synthetic-shape 3,32,32 --global-batch 128 --lr 0.05 --log-every 2
      --threads 1)
run_mpi 2 "${ARGS[@]}" --max-steps 6 --balance none --split 8,120 --metrics "$TMP/sync.jsonl" >"$TMP/sync.log" 2>&1 \
  || { cat "$TMP/sync.log"; fail "the sync run exited non-zero"; }
run_mpi 2 "${ARGS[@]}" --max-steps 12 --mode async --metrics "$TMP/async.jsonl" >"$TMP/async.log" 2>&1 \
  || { cat "$TMP/async.log"; fail "the async run exited non-zero"; }
/usr/bin/python3 - "$TMP/sync.jsonl" "$TMP/async.jsonl" <<'PY' || fail "the memory figures are wrong"
import json, sys
for path in sys.argv[1:]:
    rows = [json.loads(l) for l in open(path)]
    assert rows, "no metrics lines in " + path
    for d in rows:
        for key in ("host_mib", "host_peak_mib", "device_mib", "device_peak_mib"):
            assert len(d[key]) == 2, (path, key, d[key])
        for r in range(2):
            assert d["host_mib"][r] > 10, (path, "rank %d's resident memory %.1f MiB" % (r, d["host_mib"][r]))
            assert d["host_peak_mib"][r] >= d["host_mib"][r], (path, d["host_peak_mib"], d["host_mib"])
            assert d["device_mib"][r] == 0 and d["device_peak_mib"][r] == 0, (path, "a CPU rank with device memory")
    peaks = [max(d["host_peak_mib"][r] for d in rows) for r in range(2)]
    for r in range(2):  # a peak never goes down
        seq = [d["host_peak_mib"][r] for d in rows]
        assert all(a <= b for a, b in zip(seq, seq[1:])), (path, r, seq)
    print("%s: %d lines, resident peak per rank %s MiB" % (path.split("/")[-1], len(rows), ["%.1f" % p for p in peaks]))
    if path.endswith("/sync.jsonl"):
        assert rows[-1]["b"] == [8, 120], rows[-1]["b"]
        assert peaks[1] > peaks[0] + 40, "the rank with 120 samples should peak well above the one with 8: %s" % peaks
PY
# The run's last lines say it too, naming the rank with the most (the one with 120 samples) and no GPU part.
grep -qE '^memory: highest resident [0-9.]+ MiB \(rank 1 of 2\)$' "$TMP/sync.log" \
  || { tail -4 "$TMP/sync.log"; fail "no memory line naming rank 1 before the sync run's done line"; }
grep -qE '^memory: highest resident [0-9.]+ MiB \(rank [01] of 2\)$' "$TMP/async.log" \
  || { tail -4 "$TMP/async.log"; fail "no memory line in the async run's summary"; }
grep -h '^memory:' "$TMP/sync.log" "$TMP/async.log"
pass "every mode's metrics and last lines carry each rank's resident memory and device memory, following its own batch"
