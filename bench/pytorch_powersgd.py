#!/usr/bin/python3
"""The PowerSGD reference: PyTorch DDP (gloo, CPU, 2 processes) with its own powerSGD_hook, on a dataset
packed by hetrain-pack, as bench/powersgd_training.sh trains hetrain: resnet20 (data_tools/hetrain_models.py),
global batch 64 split evenly, SGD lr 0.05 momentum 0.9 weight decay 5e-4, cosine over the run, no
augmentation. Its own initialisation and sample order (from --seed), so compare its runs with each other.

Usage: pytorch_powersgd.py --data F.h5 --rank R (0 = exact allreduce) --start K --epochs E --seed S --port P
Prints one line "mean=<mean training loss> epochs=<e1,e2,...>"; exits 3 with a line starting "SKIP" when torch
is missing.
"""
import argparse
import math
import os
import sys

try:
    import h5py
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
except ImportError as e:
    print(f"SKIP: cannot import torch ({e})")
    sys.exit(3)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data_tools"))
from hetrain_models import ResNet20  # noqa: E402  (the same architecture as hetrain's resnet20)

WORLD, BATCH = 2, 64


def worker(rank, a, result):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    with h5py.File(a.data, "r") as f:
        mean = np.asarray(f.attrs["mean"]).reshape(1, -1, 1, 1)
        std = np.asarray(f.attrs["std"]).reshape(1, -1, 1, 1)
        x = torch.tensor((f["images"][:].astype(np.float32) / 255.0 - mean) / std, dtype=torch.float32)
        y = torch.tensor(f["labels"][:].astype(np.int64))
    torch.manual_seed(a.seed)
    # One bucket: with several, the hook's chained allreduces can reach gloo in another order on each rank.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 256 << 20
    model = nn.parallel.DistributedDataParallel(ResNet20(tuple(x.shape[1:]), 10), bucket_cap_mb=256)
    if a.rank > 0:
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=a.rank,
                                            start_powerSGD_iter=max(a.start, 2), min_compression_rate=2,
                                            use_error_feedback=True, warm_start=True, random_seed=a.seed)
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    n = x.shape[0]
    per_epoch = n // BATCH
    total = per_epoch * a.epochs
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    for epoch in range(a.epochs):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(a.seed * 1000 + epoch))
        for s in range(per_epoch):
            idx = order[s * BATCH:(s + 1) * BATCH][rank::WORLD]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            schedule.step()
            both = torch.tensor([loss.item()])
            dist.all_reduce(both)
            losses.append(both.item() / WORLD)
    if rank == 0:
        epochs = [sum(losses[e * per_epoch:(e + 1) * per_epoch]) / per_epoch for e in range(a.epochs)]
        result.put("mean=%.5f epochs=%s" % (sum(losses) / len(losses), ",".join("%.5f" % v for v in epochs)))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--rank", type=int, default=0, help="PowerSGD rank; 0 = the exact allreduce")
    ap.add_argument("--start", type=int, default=4, help="steps reduced exactly before compression starts")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=29631)
    a = ap.parse_args()
    ctx = mp.get_context("spawn")
    result = ctx.SimpleQueue()
    mp.start_processes(worker, args=(a, result), nprocs=WORLD, start_method="spawn")
    print(result.get())


if __name__ == "__main__":
    main()
