#!/usr/bin/python3
"""One line for one run of bench/overlap.sh, from its --metrics file (standard library only).

Steps from FIRST on (the first step pays one-off costs). exposed = the reduction time not hidden behind
backward, of the rank that waited longest in each step (exposed_s), summed, over the summed step times;
compute = the slowest rank's forward + backward per step.

  overlap_report.py FILE FIRST   -> step_s=… compute_s=… exposed_s=… exposed_frac=… steps=…
"""
import json
import sys


def timed_rows(path, first, who="overlap_report"):
    """The --metrics lines of steps FIRST on."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r["step"] >= first]
    if not rows:
        raise SystemExit(f"{who}: {path}: no steps at or after {first}")
    return rows


def step_figures(rows):
    """Mean step time, the slowest rank's compute, the longest exposed reduction, and its share."""
    seconds = sum(r["step_s"] for r in rows)
    exposed = sum(max(r["exposed_s"]) for r in rows)
    compute = sum(max(r["compute_s"]) for r in rows)
    n = len(rows)
    return (f"step_s={seconds / n:.4f} compute_s={compute / n:.4f} exposed_s={exposed / n:.4f} "
            f"exposed_frac={exposed / seconds:.4f} steps={n}")


def main(path, first):
    print(step_figures(timed_rows(path, first)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
