#!/usr/bin/env python3
"""Plot bench_balance_sim's CSV: the fraction of the oracle's rate and the plan changes per 1,000 steps
against the number of ranks, one line per scenario (docs/balance-sim.md).

    balance_sim_plot.py SIM.csv OUT.png
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: balance_sim_plot.py SIM.csv OUT.png")
    rows = list(csv.DictReader(open(sys.argv[1])))
    if not rows:
        sys.exit(f"balance_sim_plot.py: {sys.argv[1]} has no rows")
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 8), sharex=True)
    for name in scenarios:
        mine = sorted((r for r in rows if r["scenario"] == name), key=lambda r: int(r["ranks"]))
        ranks = [int(r["ranks"]) for r in mine]
        top.plot(ranks, [100 * float(r["oracle_fraction"]) for r in mine], marker="o", label=name)
        bottom.plot(ranks, [float(r["rebalances_per_1000"]) for r in mine], marker="o", label=name)
    top.set_ylabel("% of the oracle's rate")
    top.axhline(95, color="grey", lw=0.5, ls="--")
    top.axhline(85, color="grey", lw=0.5, ls=":")
    top.legend(fontsize=8)
    top.set_title("hetrain's balancer on virtual ranks (bench_balance_sim)")
    bottom.set_ylabel("plan changes per 1,000 steps")
    bottom.axhline(10, color="grey", lw=0.5, ls="--")
    bottom.set_xlabel("ranks")
    bottom.set_xscale("log", base=2)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print(f"plot: {sys.argv[2]}")


if __name__ == "__main__":
    main()
