#!/usr/bin/python3
"""PyTorch DDP (gloo, CPU) with the same emulated heterogeneity as hetrain's --emulate-speed.

Uniform split (DDP has no other): every process trains B/n samples per step of hetrain's lenet on one fixed
random batch (no data loader, which favours DDP slightly). Emulation: each process first measures its own
forward and forward+backward times without communication (median of a few steps under no_sync(), one
process at a time); in the timed loop it sleeps (1/s_r - 1) x (this step's forward time x that ratio),
its estimated compute, which grows with contention for cores as hetrain's measured compute does, after
its forward pass, before the backward pass whose gradient allreduce
DDP overlaps, so a slow rank joins the allreduce late, as a slow GPU would (hetrain sleeps after its
compute, before its allreduce, in the same way).

Usage: pytorch_ddp_hetero.py --speeds 0.5,0.5,0.25,0.125 --global-batch 512 --steps 40 --warmup 5 --epoch 16384
Prints one key=value line from rank 0; exits 3 with a line starting "SKIP" when torch is missing.
"""
import argparse
import os
import socket
import statistics
import sys
import time

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import torch.nn as nn
except ImportError as e:
    print(f"SKIP: cannot import torch ({e})")
    sys.exit(3)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_train_step import LeNet  # noqa: E402  (same architecture as hetrain's lenet)


def worker(rank, a, speeds, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    n = len(speeds)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    torch.manual_seed(1)
    model = nn.parallel.DistributedDataParallel(LeNet(1, 10, 28))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    b = a.global_batch // n
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(b, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (b,), generator=g)

    # Local compute time per step, without communication, one rank at a time (no contention for cores).
    times = []
    for turn in range(n):
        if turn == rank:
            with model.no_sync():
                for _ in range(5):
                    t0 = time.perf_counter()
                    opt.zero_grad()
                    loss = loss_fn(model(x), y)
                    t1 = time.perf_counter()
                    loss.backward()
                    times.append((t1 - t0, time.perf_counter() - t0))
        dist.barrier()
    compute = statistics.median(t for _, t in times[1:])
    # Backward overlaps the allreduce, so each step's compute is estimated from its forward time (which
    # includes contention for cores, as hetrain's measured compute does) times the alone-measured ratio.
    per_forward = compute / statistics.median(f for f, _ in times[1:])
    factor = (1.0 / speeds[rank] - 1.0) * per_forward

    def step():
        opt.zero_grad()
        t0 = time.perf_counter()
        loss = loss_fn(model(x), y)
        if factor > 0:
            time.sleep(factor * (time.perf_counter() - t0))
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        rate = b * n * a.steps / seconds
        print(f"impl=pytorch-ddp-gloo ranks={n} global_batch={b * n} steps={a.steps} seconds={seconds:.4f} "
              f"samples_per_s={rate:.6g} epoch_s={a.epoch / rate:.6g} compute_ms_rank0={1000 * compute:.3f}",
              flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--speeds", default="1,1,0.5,0.25")
    p.add_argument("--global-batch", type=int, default=512)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--epoch", type=int, default=16384, help="samples per epoch, for the time per epoch")
    a = p.parse_args()
    speeds = [float(s) for s in a.speeds.split(",")]
    mp.spawn(worker, args=(a, speeds, free_port()), nprocs=len(speeds), join=True)


if __name__ == "__main__":
    main()
