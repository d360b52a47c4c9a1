#!/usr/bin/python3
"""Summarises the metrics files written by bench/hetero.sh (standard library only).

Each metrics file has one JSON line per step: step, step_s, samples_per_s, efficiency, b[], compute_s[],
wait_s[], idle_s[] (waiting for slower ranks), comm_s[] (the reduction itself); compute_s includes the
emulated sleep. Steady-state throughput of a run is
sum(b over ranks and steps) / sum(step_s) over the steps at or after --skip (calibration excluded).

  hetero_report.py steady FILE FIRST[:END] [SPEEDS]  one key=value line for one run (steps FIRST..END-1)
  hetero_report.py recovery FILE CHANGE K IDEAL     intervals of K steps after CHANGE until >= 0.9·IDEAL
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steady(path, skip, speeds=None):
    first, _, end = skip.partition(":")  # "A" = steps >= A; "A:B" = A <= step < B
    rows = [r for r in load(path) if r["step"] >= int(first) and (not end or r["step"] < int(end))]
    if not rows:
        raise SystemExit(f"hetero_report: {path}: no steps at or after {skip}")
    samples = sum(sum(r["b"]) for r in rows)
    seconds = sum(r["step_s"] for r in rows)
    n = len(rows[0]["b"])
    eff = sum(r["efficiency"] for r in rows) / len(rows)
    # Data wait: the slowest rank's wait as a share of the step (what a step loses to the reader).
    wait = sum(max(r["wait_s"]) for r in rows) / seconds
    comm = sum(max(r["comm_s"]) for r in rows) / seconds
    out = {
        "samples_per_s": samples / seconds,
        "step_ms": 1000 * seconds / len(rows),
        "efficiency": eff,
        "wait_frac": wait,
        "comm_frac": comm,
        "split": "/".join(str(int(b)) for b in rows[-1]["b"]),
        "steps": len(rows),
    }
    if speeds:
        # compute_s includes the emulated sleep (1/s - 1)·compute, so real compute = compute_s·s.
        s = [float(v) for v in speeds.split(",")]
        per_sample = []
        for rank in range(n):
            busy = sum(r["compute_s"][rank] * s[rank] for r in rows)
            count = sum(r["b"][rank] for r in rows)
            if count > 0:
                per_sample.append(busy / count)
        out["compute_us_per_sample"] = 1e6 * sum(per_sample) / len(per_sample)
    print(" ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items()))


def recovery(path, change, k, ideal):
    rows = [r for r in load(path) if r["step"] >= change]
    found, trajectory = None, []
    for i in range(0, len(rows) - k + 1, k):
        chunk = rows[i:i + k]
        rate = sum(sum(r["b"]) for r in chunk) / sum(r["step_s"] for r in chunk)
        split = "/".join(str(int(b)) for b in chunk[-1]["b"])
        trajectory.append(f"{rate:.0f}@{split}")
        if found is None and rate >= 0.9 * ideal:
            found = (len(trajectory), rate, split)
    if found:
        print(f"intervals={found[0]} rate={found[1]:.6g} split={found[2]} trajectory={','.join(trajectory)}")
    else:
        print(f"intervals=never rate=0 split=- trajectory={','.join(trajectory)}")


def main(argv):
    if len(argv) >= 3 and argv[0] == "steady":
        steady(argv[1], argv[2], argv[3] if len(argv) > 3 else None)
    elif len(argv) == 5 and argv[0] == "recovery":
        recovery(argv[1], int(argv[2]), int(argv[3]), float(argv[4]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
