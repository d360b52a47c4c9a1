#!/usr/bin/python3
"""One line for one run of bench/overlap.sh, from its --metrics file (standard library only).

Steps from FIRST on (the first step pays one-off costs). exposed = the reduction time not hidden behind
backward, of the rank that waited longest in each step (exposed_s), summed, over the summed step times;
compute = the slowest rank's forward + backward per step.

  overlap_report.py FILE FIRST   -> step_s=… compute_s=… exposed_s=… exposed_frac=… steps=…
"""
import json
import sys


def main(path, first):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r["step"] >= first]
    if not rows:
        raise SystemExit(f"overlap_report: {path}: no steps at or after {first}")
    seconds = sum(r["step_s"] for r in rows)
    exposed = sum(max(r["exposed_s"]) for r in rows)
    compute = sum(max(r["compute_s"]) for r in rows)
    n = len(rows)
    print(f"step_s={seconds / n:.4f} compute_s={compute / n:.4f} exposed_s={exposed / n:.4f} "
          f"exposed_frac={exposed / seconds:.4f} steps={n}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
