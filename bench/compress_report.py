#!/usr/bin/python3
"""One line for one run of bench/compress.sh, from its --metrics file (standard library only).

  compress_report.py FILE FIRST [TARGET]
    -> step_s=… compute_s=… exposed_s=… exposed_frac=… samples_per_s=… [val_acc=… train_s=… tta_s=…]

Steps from FIRST on (the first step pays one-off costs): mean step time, the slowest rank's forward +
backward, the reduction time not hidden behind backward (the rank that waited longest; with PowerSGD its
products and orthogonalisation too) and its share of the step time. With validation points: the last
val accuracy, the summed step times of the whole run (training time, validation excluded), and the
training time at which val accuracy first reached TARGET ("-" when it never did).
"""
import json
import sys


def main(path, first, target=None):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    timed = [r for r in rows if r["step"] >= first]
    if not timed:
        raise SystemExit(f"compress_report: {path}: no steps at or after {first}")
    seconds = sum(r["step_s"] for r in timed)
    exposed = sum(max(r["exposed_s"]) for r in timed)
    compute = sum(max(r["compute_s"]) for r in timed)
    samples = sum(sum(r["b"]) for r in timed)
    n = len(timed)
    line = (f"step_s={seconds / n:.4f} compute_s={compute / n:.4f} exposed_s={exposed / n:.4f} "
            f"exposed_frac={exposed / seconds:.4f} samples_per_s={samples / seconds:.1f}")
    vals = [r for r in rows if "val_accuracy" in r]
    if vals:
        clock, tta = 0.0, "-"
        for r in rows:
            clock += r["step_s"]
            if target is not None and tta == "-" and r.get("val_accuracy", -1) >= target:
                tta = f"{clock:.1f}"
        line += f" val_acc={vals[-1]['val_accuracy']:.4f} train_s={clock:.1f} tta_s={tta}"
    print(line)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else None)
