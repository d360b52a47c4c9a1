#!/usr/bin/python3
"""Training-step throughput of a YOLOv5 (v6.0) detector in PyTorch: the reference for bench_train_step --model X.yaml.

The network is data_tools/yolov5_yaml.py's: plain torch.nn (no ultralytics package) built from the same YAML
file hetrain reads (models/yolov5{n,s,m}.yaml) by YOLOv5's rules, with YOLOv5's module and state_dict names.
yolov5s with nc = 80 has 7,235,389 parameters (yolov5n 1,872,157, yolov5m 21,190,557; YOLOv5's summary
after fusing each BN into its conv says 7,225,885 and 21,172,173); --params-only prints the count without
timing, --show the layers.

The step. A fair comparison of the training step needs the same objective on both sides, and YOLOv5's loss
(target assignment, CIoU) would be a second implementation to compare rather than the network. So both
programs use a cheap objective: the head's rows are multiplied elementwise by one fixed random tensor G
(N(0, 1) / batch, drawn once) and summed, i.e. the gradient of the rows is G. One step = zero gradients,
forward (training mode), rows.backward(G), SGD (momentum 0.9, weight decay 5e-4, lr 0.01); the loss printed
is sum(rows * G) (a dot product, computed every step on both sides). Warm-up steps are untimed.

Usage: yolov5_torch.py --model models/yolov5s.yaml --size 320 --batch 8 --threads 1 --warmup 1 --steps 3
                       [--classes 10] [--channels 3] [--max-seconds S] [--params-only] [--show]
Prints one key=value line like bench_train_step's (model= is the file's stem). Exits 3 with a line starting
"SKIP" when torch or yaml cannot be imported.
"""
import argparse
import os
import sys

try:
    import torch
    import torch.nn as nn
    import yaml
except ImportError as e:  # Debian's python3-torch / python3-yaml are optional
    print(f"SKIP: cannot import torch or yaml ({e})")
    sys.exit(3)

from pytorch_train_step import peak_rss_mib, timed_steps  # bench/, next to this file (run as bench/yolov5_torch.py)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data_tools"))
from yolov5_yaml import YoloModel  # noqa: E402  the network itself (data_tools/yolov5_yaml.py)


# ------------------------------------------------------------------------------------------------ timing
def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="models/yolov5s.yaml", help="a YOLOv5 YAML file")
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--size", type=int, default=320)
    p.add_argument("--classes", type=int, default=10, help="overrides the file's nc (0: the file's)")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--max-seconds", type=float, default=0, help="stop timing after the step that crosses this")
    p.add_argument("--params-only", action="store_true", help="print the parameter count and exit")
    p.add_argument("--show", action="store_true", help="print the layers (index, from, n, params, module, args)")
    a = p.parse_args()

    with open(a.model) as f:
        cfg = yaml.safe_load(f)
    name = os.path.splitext(os.path.basename(a.model))[0]
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = YoloModel(cfg, a.channels, a.classes if a.classes > 0 else None)
    params = sum(t.numel() for t in model.parameters())
    if a.show:
        print(f"{'':>3} {'from':>10} {'n':>3} {'params':>10}  {'module':<10} args")
        for i, frm, n, cnt, kind, args in model.table:
            print(f"{i:>3} {str(frm):>10} {n:>3} {cnt:>10}  {kind:<10} {args}")
    if a.params_only or a.show:
        print(f"model={name} classes={a.classes if a.classes > 0 else cfg['nc']} params={params}")
        return

    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, a.channels, a.size, a.size)
    with torch.no_grad():
        rows_shape = model(x[:1]).shape[1:]  # [A, 5 + nc] (one image, not timed; BN statistics reset below)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
    g = torch.randn(a.batch, *rows_shape) / a.batch  # the fixed gradient of the rows

    def step():
        opt.zero_grad(set_to_none=False)
        rows = model(x)
        rows.backward(g)
        opt.step()
        return float((rows.detach() * g).sum())

    done, seconds, loss = timed_steps(step, a.warmup, a.steps, a.max_seconds)
    print(f"impl=pytorch-{torch.__version__} model={name} size={a.size} batch={a.batch} threads={a.threads} "
          f"steps={done} params={params} seconds={seconds:.4f} samples_per_s={a.batch * done / seconds:.3f} "
          f"peak_mb={peak_rss_mib():.1f} loss={loss:.4f} rows={rows_shape[0]}x{rows_shape[1]} objective=fixed-grad")


if __name__ == "__main__":
    main()
