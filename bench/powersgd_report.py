#!/usr/bin/python3
"""Tables of bench/powersgd_training.sh's runs: lines "impl part balance rank seed mean e1,e2,..."."""
import statistics
import sys
from collections import defaultdict

runs = defaultdict(dict)  # (impl, part, balance, rank) -> {seed: (mean, [epoch means])}
for line in open(sys.argv[1]):
    impl, part, balance, rank, seed, mean, epochs = line.split()
    runs[(impl, part, balance, int(rank))][int(seed)] = (float(mean), [float(v) for v in epochs.split(",")])


def name(rank):
    return "exact" if rank == 0 else f"powersgd:{rank}"


short = sorted(k for k in runs if k[1] == "short")
if short:
    print("\n1. 2 epochs, compression from step 4: mean training loss per seed, gap to the same seed's exact run")
    print("%-8s %-8s %-12s %-30s %s" % ("impl", "balance", "exchange", "mean loss by seed", "gap by seed (mean)"))
    for impl, part, balance, rank in short:
        mine, exact = runs[(impl, part, balance, rank)], runs.get((impl, part, balance, 0), {})
        seeds = sorted(mine)
        losses = " ".join("%.4f" % mine[s][0] for s in seeds)
        gaps = [100 * (mine[s][0] / exact[s][0] - 1) for s in seeds if s in exact and rank]
        gap = (" ".join("%+.1f%%" % g for g in gaps) + " (%+.1f%%)" % statistics.mean(gaps)) if gaps else "—"
        print("%-8s %-8s %-12s %-30s %s" % (impl, balance, name(rank), losses, gap))
    print("   goal (issue): powersgd:4 within 5% of exact. PyTorch's hook is the published method as PyTorch ships it.")

long = sorted(k for k in runs if k[1] == "long")
if long:
    print("\n2. 8 epochs, compression from step 12: per seed the largest epoch-to-previous-epoch loss ratio / the last epoch's loss")
    print("%-8s %-12s %-52s %s" % ("impl", "exchange", "largest ratio by seed (> 2: a spike)", "last epoch by seed (median)"))
    for impl, part, balance, rank in long:
        mine = runs[(impl, part, balance, rank)]
        seeds = sorted(mine)
        ratios = [max(e[i] / e[i - 1] for i in range(1, len(e))) for _, e in (mine[s] for s in seeds)]
        last = [mine[s][1][-1] for s in seeds]
        print("%-8s %-12s %-52s %s (%.4f)" % (impl, name(rank), " ".join("%.1f" % r for r in ratios),
                                            " ".join("%.4f" % v for v in last), statistics.median(last)))
    print("   goal (issue): no ratio above 2; rank 16 no worse than rank 8 within the runs' spread.")
