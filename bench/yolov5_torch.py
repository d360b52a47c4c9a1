#!/usr/bin/python3
"""Training-step throughput of a YOLOv5 (v6.0) detector in PyTorch: the reference for bench_train_step --model X.yaml.

The network is built in plain torch.nn (no ultralytics package) from the same YAML file hetrain reads
(models/yolov5{n,s,m}.yaml), following YOLOv5's rules for such a file:
  * a repeat count n > 1 becomes max(round(n * depth_multiple), 1); Conv, C3 and SPPF output channels
    become ceil(c * width_multiple / 8) * 8 (the Detect head's outputs are not scaled);
  * C3 takes its repeat count as its number of bottlenecks (one module, not n stacked C3s);
  * Concat's channels are the sum of its inputs', Detect is given the channels of its inputs;
  * the strings nc, anchors and None in the args mean the class count, the file's anchors and None.
Modules:
  Conv        Conv2d(k, stride s, padding k//2 unless given, no bias) + BatchNorm2d(eps 1e-3, momentum 0.03) + SiLU
  Bottleneck  Conv 1x1 to c2*e, Conv 3x3 to c2, plus the input when asked and c1 == c2
  C3          cv1, cv2: Conv 1x1 c1 -> c2/2; n bottlenecks (e = 1) on cv1's branch; cv3: Conv 1x1 of both -> c2
  SPPF        Conv 1x1 to c1/2, three chained MaxPool2d(k, 1, k//2), the four maps concatenated, Conv 1x1
  Upsample    nn.Upsample(scale_factor 2, nearest); Concat along channels
  Detect      per level a 1x1 Conv2d with bias to na*(5+nc); training form: no sigmoid, no decoding. The
              outputs become rows [N, A, 5+nc], A = sum over levels of na*H*W, ordered level, anchor, y, x
              (the same layout as hetrain's Detect).
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
import math
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


# ------------------------------------------------------------------------------------------------ modules
class Conv(nn.Module):
    """Convolution without bias, batch norm, SiLU."""

    def __init__(self, cin, cout, k=1, s=1, p=None):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2 if p is None else p, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Bottleneck(nn.Module):
    def __init__(self, cin, cout, residual=True, e=0.5):
        super().__init__()
        mid = int(cout * e)
        self.cv1 = Conv(cin, mid, 1, 1)
        self.cv2 = Conv(mid, cout, 3, 1)
        self.residual = residual and cin == cout

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.residual else y


class C3(nn.Module):
    """CSP block: two 1x1 branches, bottlenecks on the first, a 1x1 fusion of both."""

    def __init__(self, cin, cout, n=1, residual=True, e=0.5):
        super().__init__()
        mid = int(cout * e)
        self.cv1 = Conv(cin, mid, 1, 1)
        self.cv2 = Conv(cin, mid, 1, 1)
        self.cv3 = Conv(2 * mid, cout, 1, 1)
        self.m = nn.Sequential(*[Bottleneck(mid, mid, residual, e=1.0) for _ in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    """Spatial pyramid pooling, fast form: one max pool applied three times in a chain."""

    def __init__(self, cin, cout, k=5):
        super().__init__()
        mid = cin // 2
        self.cv1 = Conv(cin, mid, 1, 1)
        self.cv2 = Conv(4 * mid, cout, 1, 1)
        self.m = nn.MaxPool2d(k, 1, k // 2)

    def forward(self, x):
        a = self.cv1(x)
        b = self.m(a)
        c = self.m(b)
        return self.cv2(torch.cat((a, b, c, self.m(c)), 1))


class Concat(nn.Module):
    def __init__(self, dim=1):
        super().__init__()
        self.dim = dim

    def forward(self, xs):
        return torch.cat(xs, self.dim)


class Detect(nn.Module):
    """Training form of the head: raw predictions of every level as rows [N, A, 5 + nc]."""

    def __init__(self, nc, anchors, in_channels):
        super().__init__()
        self.nc, self.no = nc, nc + 5
        self.na = len(anchors[0]) // 2
        self.register_buffer("anchors", torch.tensor(anchors, dtype=torch.float32).view(len(anchors), -1, 2))
        self.m = nn.ModuleList(nn.Conv2d(c, self.na * self.no, 1) for c in in_channels)

    def forward(self, xs):
        rows = []
        for conv, x in zip(self.m, xs):
            y = conv(x)
            n, _, h, w = y.shape
            # [N, na*no, H, W] -> [N, na, H, W, no] -> [N, na*H*W, no]: rows ordered anchor, y, x
            rows.append(y.view(n, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).reshape(n, -1, self.no))
        return torch.cat(rows, 1)


# ------------------------------------------------------------------------------------------------ the file
def round_up8(x):
    return int(math.ceil(x / 8) * 8)


class YoloModel(nn.Module):
    """The layers of a YOLOv5 YAML file, run in order; each layer reads the outputs named by its 'from'."""

    def __init__(self, cfg, ch=3, nc=None):
        super().__init__()
        nc = cfg["nc"] if nc is None else nc
        gd, gw = cfg.get("depth_multiple", 1.0), cfg.get("width_multiple", 1.0)
        anchors = cfg["anchors"]
        if isinstance(anchors, int):  # a count: YOLOv5 would auto-compute them; not used by our files
            raise SystemExit("yolov5_torch: integer 'anchors' is not supported")
        layers, self.froms, self.table = [], [], []
        chans = []  # output channels of each layer so far
        for i, (frm, n, kind, args) in enumerate(cfg["backbone"] + cfg["head"]):
            kind = kind.split(".")[-1]  # nn.Upsample -> Upsample

            def value(a):
                if isinstance(a, str):
                    return {"nc": nc, "anchors": anchors, "None": None}.get(a, a)
                return a

            args = [value(a) for a in args]
            reps = max(round(n * gd), 1) if n > 1 else n

            def cin(f):
                return ch if f == -1 and i == 0 else chans[f]

            if kind in ("Conv", "Bottleneck", "C3", "SPPF"):
                c1, c2, rest = cin(frm), round_up8(args[0] * gw), args[1:]
                if kind == "C3":  # the repeats become its bottleneck count: one module
                    rest = [reps] + rest
                    mods = [C3(c1, c2, *rest)]
                elif kind == "SPPF":
                    mods = [SPPF(c1, c2, *rest)]
                else:
                    block = Conv if kind == "Conv" else Bottleneck
                    mods = [block(c1 if r == 0 else c2, c2, *rest) for r in range(reps)]
                args = [c1, c2] + rest  # as built (the --show table)
            elif kind == "Upsample":
                c2 = cin(frm)
                size, scale, mode = (args + [None, None, "nearest"])[:3]
                if size is not None or mode != "nearest":
                    raise SystemExit(f"yolov5_torch: layer {i}: only Upsample(None, k, 'nearest')")
                mods = [nn.Upsample(scale_factor=scale, mode="nearest")]
            elif kind == "Concat":
                c2 = sum(cin(f) for f in frm)
                mods = [Concat(*args)]
            elif kind == "Detect":
                c2 = None
                mods = [Detect(args[0], args[1], [cin(f) for f in frm])]
            else:
                raise SystemExit(f"yolov5_torch: layer {i}: unsupported module '{kind}'")
            layer = mods[0] if len(mods) == 1 else nn.Sequential(*mods)
            layers.append(layer)
            self.froms.append(frm)
            chans.append(c2)
            self.table.append((i, frm, reps, sum(p.numel() for p in layer.parameters()), kind, args))
        self.layers = nn.ModuleList(layers)
        # Keep an output only while a later layer reads it.
        used = set()
        for i, f in enumerate(self.froms):
            for j in (f if isinstance(f, list) else [f]):
                if j != -1:
                    used.add(j if j >= 0 else i + j)
        self.keep = used

    def forward(self, x):
        saved = {}
        for i, (layer, f) in enumerate(zip(self.layers, self.froms)):
            if isinstance(f, list):
                x = layer([x if j == -1 else saved[j] for j in f])
            elif f != -1:
                x = layer(saved[f])
            else:
                x = layer(x)
            if i in self.keep:
                saved[i] = x
        return x


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
