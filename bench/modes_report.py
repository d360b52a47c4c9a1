#!/usr/bin/env python3
"""Summarises bench/modes.sh: reads OUT/{a,b}-MODE-SEED.log, prints time to the target accuracy per
scenario and mode (median over seeds) with the ratios the modes are judged by, and plots accuracy against
wall time (seed 1) to a PNG. Usage: modes_report.py OUT TARGET SEEDS PNG"""
import os
import re
import statistics
import sys

LINE = re.compile(r"^validation at sample (\d+) \(epoch ([0-9.]+)\) after ([0-9.]+) s of training: "
                  r"loss [0-9.naif]+, accuracy ([0-9.]+)%")
RATE = re.compile(r"^done: .*?([0-9.]+) samples/s")
MODES = ["uniform", "dynamic", "async", "hybrid"]
SCENARIOS = {"a": "(a) steady speeds {1, 1, 0.5, 0.25}", "b": "(b) equal speeds, transient 4x stragglers"}


def read(path):
    points, rate = [], None
    if not os.path.exists(path):
        return points, rate
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if m:
            points.append((int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4))))
        m = RATE.match(line)
        if m:
            rate = float(m.group(1))
    return points, rate


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    out, target, seeds, png = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    runs = {(s, m, k): read(os.path.join(out, "%s-%s-%d.log" % (s, m, k)))
            for s in SCENARIOS for m in MODES for k in range(1, seeds + 1)}
    for s, title in SCENARIOS.items():
        # Equal wall time: the shortest complete run of this scenario (median over seeds per mode).
        ends = [median([runs[(s, m, k)][0][-1][2] if runs[(s, m, k)][0] else None for k in range(1, seeds + 1)])
                for m in MODES]
        equal = min([e for e in ends if e is not None], default=None)
        print("   %s" % title)
        print("   %-8s %14s %13s %17s %12s %11s" % ("mode", "to %.0f%% (s)" % target, "epochs to it",
                                                  "acc at %s s" % fmt(equal, ".0f"), "final acc", "samples/s"))
        summary = {}
        for m in MODES:
            t_hit, e_hit, at_equal, final, rate = [], [], [], [], []
            for k in range(1, seeds + 1):
                points, r = runs[(s, m, k)]
                hit = next((p for p in points if p[3] >= target), None)
                t_hit.append(hit[2] if hit else None)
                e_hit.append(hit[1] if hit else None)
                before = [p[3] for p in points if equal is not None and p[2] <= equal + 1e-9]
                at_equal.append(before[-1] if before else None)
                final.append(points[-1][3] if points else None)
                rate.append(r)
            summary[m] = median(t_hit)
            missed = sum(v is None for v in t_hit)
            print("   %-8s %14s %13s %16s%% %11s%% %11s%s" % (
                m, fmt(median(t_hit), ".1f"), fmt(median(e_hit), ".2f"), fmt(median(at_equal), ".2f"),
                fmt(median(final), ".2f"), fmt(median(rate), ".0f"),
                "  (target missed in %d of %d runs)" % (missed, seeds) if missed else ""))
        ratio = lambda a, b: ("%.2fx" % (summary[b] / summary[a])) if summary.get(a) and summary.get(b) else "-"
        if s == "a":
            best = min((m for m in MODES if summary[m]), key=lambda m: summary[m], default=None)
            if best:
                print("   best mode %s reaches %.0f%% %s faster than the uniform split (goal >= 2.5x)"
                      % (best, target, ratio(best, "uniform")))
        else:
            for m in ("async", "hybrid"):
                print("   %s: time to %.0f%% is %s that of sync dynamic (goal <= 0.8)"
                      % (m, target, "%.2f" % (summary[m] / summary["dynamic"]) if summary.get(m) and summary.get("dynamic") else "-"))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("   plot: skipped (python3-matplotlib is not installed: make deps)")
        return
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, (s, title) in zip(axes, SCENARIOS.items()):
        for m in MODES:
            points, _ = runs[(s, m, 1)]
            if points:
                ax.plot([p[2] for p in points], [p[3] for p in points], marker="o", markersize=3, label=m)
        ax.axhline(target, color="grey", linestyle=":", linewidth=1)
        ax.set_title(title + " (EMULATED)")
        ax.set_xlabel("training wall time (s), validation excluded")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("test accuracy (%)")
    if axes[0].get_lines():
        axes[0].legend()
    fig.suptitle("hetrain modes: lenet on Fashion-MNIST, 4 ranks, seed 1")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    print("   plot: %s" % png)


if __name__ == "__main__":
    main()
