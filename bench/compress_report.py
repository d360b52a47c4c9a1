#!/usr/bin/python3
"""One line for one run of bench/compress.sh, from its --metrics file (standard library only).

  compress_report.py FILE FIRST [TARGET]
    -> step_s=… compute_s=… exposed_s=… exposed_frac=… steps=… samples_per_s=… [val_acc=… train_s=… tta_s=…]

Steps from FIRST on (the first step pays one-off costs): overlap_report.py's figures (mean step time, the
slowest rank's forward + backward, the reduction time not hidden behind backward, the rank that waited
longest, with PowerSGD's products and orthogonalisation included here, and its share of the step time), and
samples/s. With validation points: the last
val accuracy, the summed step times of the whole run (training time, validation excluded), and the
training time at which val accuracy first reached TARGET ("-" when it never did).
"""
import json
import sys

from overlap_report import step_figures, timed_rows


def main(path, first, target=None):
    timed = timed_rows(path, first, "compress_report")
    samples = sum(sum(r["b"]) for r in timed)
    line = f"{step_figures(timed)} samples_per_s={samples / sum(r['step_s'] for r in timed):.1f}"
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
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
