#!/usr/bin/env -S /usr/bin/python3
"""Plot what `hetrain train --metrics FILE` recorded (docs/report.md).

    data_tools/hetrain_report.py run.jsonl -o report.png
    data_tools/hetrain_report.py uniform.jsonl dynamic.jsonl -o compare.html

One metrics file gives one figure of four panels: each rank's share b_r of the global batch over the
steps (rebalances marked), each rank's compute, data-wait, communication and idle seconds per step,
balance efficiency and samples/s, and the training loss and accuracy (with the validation accuracy of
each epoch when the file has it, under the key "val_accuracy"). Several files add a comparison figure:
throughput and training accuracy against wall time, one curve per file.

`-o NAME.png` writes one PNG (the comparison first, then one figure per file); `-o NAME.html` writes a
self-contained page with the same figures as separate base64 PNG images and a summary table (with the
highest resident and GPU memory any rank reached, where the file has them). The output
is written under a temporary name and renamed. Every problem is one line on stderr,
`hetrain report: error: FILE: problem`, and exit status 1; nothing is left at the output path. A last line
cut short (a run killed while writing it: its metrics are still in PATH.tmp-PID) is left out with one
`hetrain report: note: ...` line on stderr, and the complete lines are used.
"""

import argparse
import base64
import html
import io
import json
import math
import os
import re
import sys

PROG = "hetrain report"
DPI = 100
FILE_FIGSIZE = (14, 10)      # inches: 1400 x 1000 px per metrics file
COMPARE_FIGSIZE = (14, 5)    # inches: 1400 x 500 px for the comparison of several files
TIMES = (("compute_s", "compute", "#1f77b4"), ("wait_s", "data wait", "#ff7f0e"),
         ("comm_s", "communication", "#2ca02c"), ("idle_s", "idle", "#b0b0b0"))
VAL_KEY = "val_accuracy"
REQUIRED = ("step", "b", "step_s")
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
# C's printf writes non-finite numbers as nan / inf (a diverged loss); JSON has no spelling for them.
NON_FINITE = re.compile(r"(?<=[:,\[])\s*(-?)(nan|inf(?:inity)?)\b", re.IGNORECASE)


class ReportError(Exception):
    """A problem with one file; the message is 'FILE: problem'."""


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _fix_non_finite(text):
    return NON_FINITE.sub(lambda m: "NaN" if m.group(2).lower() == "nan" else m.group(1) + "Infinity", text)


class Run:
    """The columns of one metrics file."""

    def __init__(self, path, rows):
        self.path = path
        self.stem = os.path.splitext(os.path.basename(path))[0] or os.path.basename(path)
        self.label = self.stem
        self.ranks = len(rows[0]["b"])
        # Non-finite values (a diverged loss) are gaps in the plots.
        col = lambda key: [float(r[key]) if _number(r.get(key)) and math.isfinite(r[key]) else math.nan
                           for r in rows]
        self.step = [int(r["step"]) for r in rows]
        self.epoch = [int(r["epoch"]) if _number(r.get("epoch")) else -1 for r in rows]
        self.step_s = col("step_s")
        self.loss = col("loss")
        self.accuracy = col("accuracy")
        self.efficiency = col("efficiency")
        self.b = [[float(x) for x in r["b"]] for r in rows]
        self.batch = [sum(b) for b in self.b]
        sps = col("samples_per_s")
        # Older or partial lines without samples_per_s: it is B / step_s by definition.
        self.samples_per_s = [s if not math.isnan(s) else (bb / t if t > 0 else math.nan)
                              for s, bb, t in zip(sps, self.batch, self.step_s)]
        self.times = {key: ([[float(x) for x in r[key]] for r in rows] if all(key in r for r in rows) else None)
                      for key, _, _ in TIMES}
        self.val = [(s, float(r[VAL_KEY])) for s, r in zip(self.step, rows) if _number(r.get(VAL_KEY))]
        # Rebalances: steps whose split differs from the step before.
        self.rebalances = [self.step[i] for i in range(1, len(rows)) if self.b[i] != self.b[i - 1]]
        wall, t = [], 0.0
        for s in self.step_s:
            t += s if s > 0 else 0.0
            wall.append(t)
        self.wall = wall
        # Like the trainer's summary: samples over seconds, after the first step (it warms up).
        timed = slice(1, None) if len(rows) > 1 else slice(0, None)
        secs = sum(s for s in self.step_s[timed] if s > 0)
        self.mean_sps = sum(self.batch[timed]) / secs if secs > 0 else 0.0
        # The highest memory any rank reached, and which rank (None where the file has no such figures:
        # metrics written before they existed).
        self.host_peak = self._highest(rows, "host_peak_mib")
        self.device_peak = self._highest(rows, "device_peak_mib")

    @staticmethod
    def _highest(rows, key):
        best = None
        for r in rows:
            for rank, v in enumerate(r.get(key) or []):
                if _number(v) and math.isfinite(v) and (best is None or v > best[0]):
                    best = (float(v), rank)
        return best

    def memory_text(self):
        """'410 MiB (rank 1)' for the host and the GPU, or 'n/a'."""
        text = lambda p: "%.0f MiB (rank %d)" % p if p else "n/a"
        return text(self.host_peak), text(self.device_peak)

    def headline(self):
        b = sorted(set(int(x) for x in self.batch))
        return "%s: %d rank%s, %d steps (%d-%d), global batch %s, mean %.1f samples/s, %d rebalance%s" % (
            self.label, self.ranks, "" if self.ranks == 1 else "s", len(self.step), self.step[0], self.step[-1],
            "/".join(map(str, b[:3])) + ("..." if len(b) > 3 else ""), self.mean_sps,
            len(self.rebalances), "" if len(self.rebalances) == 1 else "s")


def _cut_short(raw):
    """True for a final line (no newline after it) that does not parse: the writer ends every line with one."""
    try:
        json.loads(_fix_non_finite(raw.decode("utf-8", "replace")))
        return False
    except RecursionError:  # complete but nested too deeply: read_metrics names it
        return False
    except ValueError:
        return True


def read_metrics(path, notes=None):
    """Reads and checks one metrics file; raises ReportError naming it and the problem.

    A last line without its newline that is not JSON was cut short (a run killed while writing it, whose
    metrics are still in its temporary PATH.tmp-PID): it is left out, and a note saying so goes to `notes`.
    """
    if not os.path.exists(path):
        raise ReportError("%s: no such file" % path)
    if not os.path.isfile(path):
        raise ReportError("%s: not a regular file" % path)
    try:
        with open(path, "rb") as f:
            head = f.read(len(HDF5_SIGNATURE))
            if head == HDF5_SIGNATURE:
                raise ReportError("%s: an HDF5 file, not a metrics file (JSON lines from hetrain train --metrics)"
                                  % path)
            f.seek(0)
            raw_lines = f.read().split(b"\n")
    except OSError as e:
        raise ReportError("%s: cannot read (%s)" % (path, e.strerror or e))
    rows = []
    for n, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            continue
        where = "%s: line %d" % (path, n)
        if n == len(raw_lines) and _cut_short(raw):
            if notes is not None:
                notes.append("%s is cut short (the run was stopped while writing it): using the %d complete "
                             "line%s before it" % (where, len(rows), "" if len(rows) == 1 else "s"))
            break
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ReportError("%s is not text: not a metrics file (JSON lines from hetrain train --metrics)"
                              % where)
        try:
            row = json.loads(_fix_non_finite(text))
        except RecursionError:
            raise ReportError("%s nests JSON too deeply to read (a metrics line is one flat object): not a metrics "
                              "file (JSON lines from hetrain train --metrics)" % where)
        except ValueError:
            raise ReportError("%s is not JSON: not a metrics file (JSON lines from hetrain train --metrics)"
                              % where)
        if not isinstance(row, dict):
            raise ReportError("%s is not a JSON object: not a metrics file" % where)
        missing = [k for k in REQUIRED if k not in row]
        if missing:
            raise ReportError("%s has no %s: not a metrics file (JSON lines from hetrain train --metrics)"
                              % (where, ", ".join("'%s'" % k for k in missing)))
        if not _number(row["step"]) or row["step"] != int(row["step"]):
            raise ReportError("%s: 'step' is not an integer" % where)
        if not _number(row["step_s"]):
            raise ReportError("%s: 'step_s' is not a number" % where)
        for key in ("b",) + tuple(k for k, _, _ in TIMES):
            if key not in row:
                continue
            v = row[key]
            if not isinstance(v, list) or not v or not all(_number(x) for x in v):
                raise ReportError("%s: '%s' is not a list of numbers, one per rank" % (where, key))
        ranks = len(row["b"])
        if rows and ranks != len(rows[0]["b"]):
            raise ReportError("%s has %d ranks, the first line has %d: inconsistent rank counts"
                              % (where, ranks, len(rows[0]["b"])))
        for key, _, _ in TIMES:
            if key in row and len(row[key]) != ranks:
                raise ReportError("%s: '%s' has %d entries but 'b' has %d ranks" % (where, key, len(row[key]), ranks))
        rows.append(row)
    if not rows:
        if raw_lines[-1].strip():
            raise ReportError("%s: line %d is cut short and no complete line comes before it" % (path, len(raw_lines)))
        raise ReportError("%s: empty file, no steps" % path)
    return Run(path, rows)


def _smooth(values, n=None):
    """Trailing mean over a window of about 2% of the points (NaN-aware)."""
    import numpy as np
    v = np.asarray(values, dtype=float)
    if n is None:
        n = max(1, len(v) // 30)
    if n <= 1 or len(v) == 0:
        return v
    ok = np.isfinite(v)
    s = np.cumsum(np.where(ok, v, 0.0))
    c = np.cumsum(ok.astype(float))
    s = np.concatenate(([0.0], s))
    c = np.concatenate(([0.0], c))
    idx = np.arange(1, len(v) + 1)
    lo = np.maximum(0, idx - n)
    cnt = c[idx] - c[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, (s[idx] - s[lo]) / np.maximum(cnt, 1), np.nan)


def _rank_colors(n):
    import matplotlib
    cmap = matplotlib.colormaps["tab10" if n <= 10 else ("tab20" if n <= 20 else "viridis")]
    if n <= 20:
        return [cmap(i % cmap.N) for i in range(n)]
    return [cmap(i / max(1, n - 1)) for i in range(n)]


def _note(ax, text):
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", fontsize=10, color="0.4",
            bbox=dict(boxstyle="round", fc="white", ec="0.7"))


def _panel_split(ax, run):
    import numpy as np
    b = np.asarray(run.b).T  # ranks x steps
    colors = _rank_colors(run.ranks)
    # The split is piecewise constant: draw it as steps so a rebalance is a vertical edge.
    if len(run.step) > 1:
        ax.stackplot(run.step, b, colors=colors, step="post", linewidth=0,
                     labels=["rank %d" % r for r in range(run.ranks)])
    else:  # one step: one stacked bar
        bottom = 0.0
        for r in range(run.ranks):
            ax.bar(run.step[0] + 0.5, b[r][0], width=1, bottom=bottom, color=colors[r], label="rank %d" % r)
            bottom += b[r][0]
    if run.rebalances:
        ymax = max(run.batch) if run.batch else 1
        ax.vlines(run.rebalances, 0, ymax, colors="black", linestyles="--", linewidth=0.8,
                  label="rebalance (%d)" % len(run.rebalances))
    ax.set_xlim(run.step[0], max(run.step[-1], run.step[0] + 1))
    ax.set_ylim(0, max(run.batch) * 1.02 if max(run.batch) > 0 else 1)
    ax.set_xlabel("step")
    ax.set_ylabel("samples per step (b_r, stacked)")
    ax.set_title("Per-rank share of the global batch" +
                 ("" if run.rebalances else " (no rebalance)"), fontsize=11)
    if run.ranks <= 16:
        ax.legend(loc="lower left", fontsize=7, ncol=min(4, run.ranks + 1), framealpha=0.8)
    else:
        ax.text(0.01, 0.01, "%d ranks, rank 0 at the bottom" % run.ranks, transform=ax.transAxes, fontsize=8,
                bbox=dict(boxstyle="round", fc="white", ec="0.7", alpha=0.8))


def _panel_times(ax, run):
    import numpy as np
    if any(run.times[k] is None for k, _, _ in TIMES):
        _note(ax, "no per-rank times in this file")
        ax.set_title("Per-rank seconds per step", fontsize=11)
        return
    n, R = len(run.step), run.ranks
    # Windows of steps, each a group of one stacked bar per rank: few windows when there are many ranks.
    windows = max(1, min(8, 48 // R, n))
    edges = np.linspace(0, n, windows + 1).astype(int)
    group = 0.85
    width = group / R
    for w in range(windows):
        a, z = edges[w], edges[w + 1]
        if z <= a:
            continue
        x = w - group / 2 + width * (np.arange(R) + 0.5)
        bottom = np.zeros(R)
        for key, name, color in TIMES:
            m = np.nanmean(np.asarray(run.times[key][a:z], dtype=float), axis=0)
            m = np.nan_to_num(m)
            ax.bar(x, m, width=width * 0.92, bottom=bottom, color=color, label=name if w == 0 else None,
                   linewidth=0)
            bottom += m
        if R <= 8:
            for r in range(R):
                ax.text(x[r], bottom[r], str(r), ha="center", va="bottom", fontsize=6, color="0.3")
    ax.set_xticks(range(windows))
    ax.set_xticklabels(["steps %d-%d" % (run.step[edges[w]], run.step[max(edges[w], edges[w + 1] - 1)])
                        for w in range(windows)], fontsize=7, rotation=0 if windows <= 4 else 20)
    ax.set_xlim(-0.5, windows - 0.5)
    ax.set_ylabel("mean seconds per step")
    ax.set_title("Per-rank time per step, mean over windows (one bar per rank, rank 0 left)", fontsize=11)
    ax.legend(loc="upper right", fontsize=8, ncol=4, framealpha=0.8)
    ax.margins(y=0.12)


def _panel_speed(ax, run):
    import numpy as np
    mk = "o" if len(run.step) == 1 else None
    eff = np.asarray(run.efficiency, dtype=float)
    ax.plot(run.step, eff * 100, color="#9467bd", linewidth=0.6, alpha=0.35)
    ax.plot(run.step, _smooth(eff * 100), color="#9467bd", linewidth=1.6, label="balance efficiency (smoothed)", marker=mk)
    ax.set_ylim(0, 105)
    ax.set_xlabel("step")
    ax.set_ylabel("balance efficiency (%)", color="#9467bd")
    ax2 = ax.twinx()
    sps = np.asarray(run.samples_per_s, dtype=float)
    ax2.plot(run.step, sps, color="#d62728", linewidth=0.6, alpha=0.35)
    ax2.plot(run.step, _smooth(sps), color="#d62728", linewidth=1.6, label="samples/s (smoothed)", marker=mk)
    top = np.nanpercentile(sps, 99) if np.isfinite(sps).any() else 1
    ax2.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax2.set_ylabel("samples/s", color="#d62728")
    if run.rebalances:
        ax.vlines(run.rebalances, 0, 105, colors="black", linestyles="--", linewidth=0.6, alpha=0.5)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, fontsize=8,
              frameon=False)
    ax.set_title("Balance efficiency and throughput (mean %.1f samples/s)" % run.mean_sps, fontsize=11)


def _panel_training(ax, run):
    import numpy as np
    mk = "o" if len(run.step) == 1 else None
    loss = np.asarray(run.loss, dtype=float)
    ax.plot(run.step, loss, color="#1f77b4", linewidth=0.6, alpha=0.35)
    ax.plot(run.step, _smooth(loss), color="#1f77b4", linewidth=1.6, label="training loss (smoothed)", marker=mk)
    ax.set_xlabel("step")
    ax.set_ylabel("loss", color="#1f77b4")
    finite = loss[np.isfinite(loss)]
    if finite.size:
        ax.set_ylim(0, max(float(np.percentile(finite, 99)) * 1.1, 1e-6))
    ax2 = ax.twinx()
    acc = np.asarray(run.accuracy, dtype=float) * 100
    ax2.plot(run.step, acc, color="#2ca02c", linewidth=0.6, alpha=0.35)
    ax2.plot(run.step, _smooth(acc), color="#2ca02c", linewidth=1.6, label="training accuracy (smoothed)", marker=mk)
    if run.val:
        vs, va = zip(*run.val)
        ax2.plot(vs, [v * 100 for v in va], color="black", marker="o", linewidth=1.2,
                 label="validation accuracy (per epoch)")
        for s, v in run.val:
            ax2.annotate("%.1f%%" % (v * 100), (s, v * 100), textcoords="offset points", xytext=(0, 6),
                         ha="center", fontsize=7)
    else:
        ax2.text(0.5, 0.04, "no validation accuracy in this file", transform=ax2.transAxes, ha="center",
                 fontsize=9, color="0.4")
    ax2.set_ylim(0, 105)
    ax2.set_ylabel("accuracy (%)", color="#2ca02c")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3, fontsize=8,
              frameon=False)
    ax.set_title("Training loss and accuracy", fontsize=11)


def draw_run(fig, run):
    axes = fig.subplots(2, 2)
    _panel_split(axes[0][0], run)
    _panel_times(axes[0][1], run)
    _panel_speed(axes[1][0], run)
    _panel_training(axes[1][1], run)
    fig.suptitle(run.headline(), fontsize=12, fontweight="bold")


def draw_comparison(fig, runs):
    import numpy as np
    ax1, ax2 = fig.subplots(1, 2)
    for run in runs:
        wall = np.asarray(run.wall)
        n = max(1, len(run.step) // 15)
        line, = ax1.plot(wall, _smooth(run.samples_per_s, n), linewidth=1.6,
                         label="%s (%d ranks, mean %.1f samples/s)" % (run.label, run.ranks, run.mean_sps))
        ax2.plot(wall, _smooth(np.asarray(run.accuracy, dtype=float) * 100, n), linewidth=1.6, color=line.get_color(),
                 label=run.label)
        if run.val:
            idx = {s: i for i, s in enumerate(run.step)}
            ax2.plot([wall[idx[s]] for s, _ in run.val], [v * 100 for _, v in run.val], marker="o",
                     linestyle=":", color=line.get_color(), label="%s validation" % run.label)
    ax1.set_xlabel("wall time (s, sum of step_s)")
    ax1.set_ylabel("samples/s (smoothed)")
    ax1.set_ylim(bottom=0)
    ax1.set_title("Throughput against wall time", fontsize=11)
    ax1.legend(fontsize=8, loc="lower right", framealpha=0.8)
    ax2.set_xlabel("wall time (s, sum of step_s)")
    ax2.set_ylabel("training accuracy (%, smoothed)")
    ax2.set_ylim(0, 105)
    ax2.set_title("Training accuracy against wall time", fontsize=11)
    ax2.legend(fontsize=8, loc="lower right", framealpha=0.8)
    fig.suptitle("Comparison of %d runs: " % len(runs) +
                 ", ".join("%s %.1f samples/s" % (r.label, r.mean_sps) for r in runs),
                 fontsize=12, fontweight="bold")


def _label_runs(runs):
    """Legend names are the files' stems; equal stems get their folder too."""
    from collections import Counter
    count = Counter(r.stem for r in runs)
    for r in runs:
        if count[r.stem] > 1:
            parent = os.path.basename(os.path.dirname(os.path.abspath(r.path)))
            r.label = "%s/%s" % (parent, r.stem)
    count = Counter(r.label for r in runs)
    seen = Counter()
    for r in runs:
        if count[r.label] > 1:
            seen[r.label] += 1
            r.label = "%s #%d" % (r.label, seen[r.label])


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def render(runs, kind):
    """The output's bytes: one PNG, or an HTML page with one PNG per figure."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    if kind == "png":
        heights = ([COMPARE_FIGSIZE[1]] if len(runs) > 1 else []) + [FILE_FIGSIZE[1]] * len(runs)
        fig = Figure(figsize=(FILE_FIGSIZE[0], sum(heights)), dpi=DPI, layout="constrained")
        subs = fig.subfigures(len(heights), 1, height_ratios=heights, squeeze=False)[:, 0] if len(heights) > 1 \
            else [fig]
        if len(runs) > 1:
            draw_comparison(subs[0], runs)
            subs = subs[1:]
        for sub, run in zip(subs, runs):
            draw_run(sub, run)
        return _png(fig)
    images = []
    if len(runs) > 1:
        fig = Figure(figsize=COMPARE_FIGSIZE, dpi=DPI, layout="constrained")
        draw_comparison(fig, runs)
        images.append(("comparison of %d runs" % len(runs), _png(fig)))
    for run in runs:
        fig = Figure(figsize=FILE_FIGSIZE, dpi=DPI, layout="constrained")
        draw_run(fig, run)
        images.append((run.label, _png(fig)))
    return html_page(runs, images).encode("utf-8")


def html_page(runs, images):
    e = html.escape
    rows = []
    for r in runs:
        val = "%.2f%%" % (r.val[-1][1] * 100) if r.val else "none"
        fin_acc = next((a for a in reversed(r.accuracy) if not math.isnan(a)), math.nan)
        fin_loss = next((l for l in reversed(r.loss) if not math.isnan(l)), math.nan)
        host, device = r.memory_text()
        rows.append("<tr><td>%s</td><td>%d</td><td>%d</td><td>%.1f</td><td>%d</td><td>%.4f</td><td>%.2f%%</td>"
                    "<td>%s</td><td>%s</td><td>%s</td></tr>" % (e(r.label), r.ranks, len(r.step), r.mean_sps,
                                                              len(r.rebalances), fin_loss, fin_acc * 100, val,
                                                              e(host), e(device)))
    out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\"><title>hetrain report</title>",
           "<style>body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}"
           "td,th{border:1px solid #aaa;padding:2px 8px;text-align:right}td:first-child{text-align:left}"
           "img{max-width:100%;display:block;margin:1em 0}</style></head><body>",
           "<h1>hetrain report</h1>",
           "<table><tr><th>run</th><th>ranks</th><th>steps</th><th>mean samples/s</th><th>rebalances</th>"
           "<th>final training loss</th><th>final training accuracy</th><th>final validation accuracy</th>"
           "<th>peak resident memory</th><th>peak GPU memory (hetrain's own)</th></tr>"]
    out += rows
    out.append("</table>")
    for title, png in images:
        out.append("<h2>%s</h2>" % e(title))
        out.append("<img alt=\"%s\" src=\"data:image/png;base64,%s\">" % (e(title, quote=True),
                                                                         base64.b64encode(png).decode("ascii")))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Plot per-step metrics from hetrain train --metrics: the split, per-rank times, "
                    "efficiency and throughput, loss and accuracy; several files are also compared.")
    p.add_argument("metrics", nargs="+", help="JSON-lines files written by hetrain train --metrics")
    p.add_argument("-o", "--output", required=True, help="report.png, or report.html (images embedded)")
    args = p.parse_args(argv)
    out = args.output
    try:
        kind = os.path.splitext(out)[1].lower().lstrip(".")
        if kind not in ("png", "html", "htm"):
            raise ReportError("%s: unknown output extension '%s' (use .png or .html)"
                              % (out, os.path.splitext(out)[1]))
        kind = "png" if kind == "png" else "html"
        if os.path.isdir(out):
            raise ReportError("%s: is a folder, cannot write the report there" % out)
        notes = []
        runs = [read_metrics(path, notes) for path in args.metrics]
        _label_runs(runs)
        try:
            import matplotlib  # noqa: F401
            import numpy  # noqa: F401
        except ImportError as err:
            raise ReportError("%s: cannot plot: %s for %s (install python3-matplotlib: make deps)"
                              % (out, err, sys.executable))
        tmp = os.path.join(os.path.dirname(out) or ".", ".%s.tmp-%d" % (os.path.basename(out), os.getpid()))
        try:
            f = open(tmp, "wb")  # before drawing: an unwritable output fails at once
        except OSError as err:
            raise ReportError("%s: cannot write (%s)" % (out, err.strerror or err))
        try:
            with f:
                f.write(render(runs, kind))
            os.replace(tmp, out)
        except BaseException as err:
            if os.path.exists(tmp):
                os.remove(tmp)
            if isinstance(err, OSError):
                raise ReportError("%s: cannot write (%s)" % (out, err.strerror or err))
            raise
    except ReportError as err:
        print("%s: error: %s" % (PROG, err), file=sys.stderr)
        return 1
    for note in notes:
        print("%s: note: %s" % (PROG, note), file=sys.stderr)
    print("%s: %s of %d run%s: %s" % (out, "PNG" if kind == "png" else "HTML page", len(runs),
                                      "" if len(runs) == 1 else "s",
                                      ", ".join("%s (%d ranks, %d steps, %.1f samples/s)" % (
                                          r.label, r.ranks, len(r.step), r.mean_sps) for r in runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
