#!/usr/bin/env -S /usr/bin/python3
"""A YOLOv5 (v6.0/v7.0) detector built in plain torch.nn (no ultralytics package) from the same YAML file
hetrain reads (models/yolov5{n,s,m}.yaml), with YOLOv5's module names, so its state_dict keys are YOLOv5's
and hetrain's (docs/checkpoint-format.md): model.0.conv.weight, model.24.m.0.bias, model.24.anchors, ...

YOLOv5's rules for such a file:
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
              outputs are rows [N, A, 5+nc], A = sum over levels of na*H*W, ordered level, anchor, y, x
              (the layout of hetrain's Detect and of its checkpoints' --dump-batch rows).

    import yolov5_yaml
    model = yolov5_yaml.from_yaml("models/yolov5n.yaml", channels=3, num_classes=10)
    model.measure_strides()       # anchors in stride units, as in YOLOv5's state_dict
    rows = model.eval()(images)   # images / 255, float32 [N, C, H, W]
"""

import math

import torch
import torch.nn as nn


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
    """Training form of the head: raw predictions of every level as rows [N, A, 5 + nc]. `anchors` is a
    buffer [levels, na, 2] in units of each level's stride once YoloModel has measured the strides, as in
    YOLOv5's state_dict."""

    def __init__(self, nc, anchors, in_channels):
        super().__init__()
        self.nc, self.no = nc, nc + 5
        self.na = len(anchors[0]) // 2
        self.register_buffer("anchors", torch.tensor(anchors, dtype=torch.float32).view(len(anchors), -1, 2))
        self.m = nn.ModuleList(nn.Conv2d(c, self.na * self.no, 1) for c in in_channels)
        self.level_sizes = []  # (h, w) of each level in the last forward

    def forward(self, xs):
        rows = []
        self.level_sizes = []
        for conv, x in zip(self.m, xs):
            y = conv(x)
            n, _, h, w = y.shape
            self.level_sizes.append((h, w))
            # [N, na*no, H, W] -> [N, na, H, W, no] -> [N, na*H*W, no]: rows ordered anchor, y, x
            rows.append(y.view(n, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).reshape(n, -1, self.no))
        return torch.cat(rows, 1)


# ------------------------------------------------------------------------------------------------ the file
def round_up8(x):
    return int(math.ceil(x / 8) * 8)


class YoloModel(nn.Module):
    """The layers of a YOLOv5 YAML file, run in order; each layer reads the outputs named by its 'from'.
    Call measure_strides(h, w) once to express the Detect anchors in stride units (YOLOv5's Model does
    that with a 256×256 input)."""

    def __init__(self, cfg, ch=3, nc=None):
        super().__init__()
        nc = cfg["nc"] if nc is None else nc
        self.channels = ch
        gd, gw = cfg.get("depth_multiple", 1.0), cfg.get("width_multiple", 1.0)
        anchors = cfg["anchors"]
        if isinstance(anchors, int):  # a count: YOLOv5 would auto-compute them; not used by our files
            raise ValueError("integer 'anchors' (YOLOv5's autoanchor count) is not supported")
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
                    raise ValueError(f"layer {i}: only Upsample(None, k, 'nearest') is supported")
                mods = [nn.Upsample(scale_factor=scale, mode="nearest")]
            elif kind == "Concat":
                c2 = sum(cin(f) for f in frm)
                mods = [Concat(*args)]
            elif kind == "Detect":
                c2 = None
                mods = [Detect(args[0], args[1], [cin(f) for f in frm])]
            else:
                raise ValueError(f"layer {i}: unsupported module '{kind}'")
            layer = mods[0] if len(mods) == 1 else nn.Sequential(*mods)
            layers.append(layer)
            self.froms.append(frm)
            chans.append(c2)
            self.table.append((i, frm, reps, sum(p.numel() for p in layer.parameters()), kind, args))
        self.model = nn.ModuleList(layers)  # YOLOv5's name: state_dict keys model.0.conv.weight, ...
        # Keep an output only while a later layer reads it.
        used = set()
        for i, f in enumerate(self.froms):
            for j in (f if isinstance(f, list) else [f]):
                if j != -1:
                    used.add(j if j >= 0 else i + j)
        self.keep = used

    def forward(self, x):
        saved = {}
        for i, (layer, f) in enumerate(zip(self.model, self.froms)):
            if isinstance(f, list):
                x = layer([x if j == -1 else saved[j] for j in f])
            elif f != -1:
                x = layer(saved[f])
            else:
                x = layer(x)
            if i in self.keep:
                saved[i] = x
        return x

    def measure_strides(self, h=256, w=256):
        """Each Detect level's stride from one forward of a zero image; divides the anchors by them."""
        detect = self.model[-1]
        was_training = self.training
        self.eval()
        with torch.no_grad():
            self(torch.zeros(1, self.channels, h, w))
        self.train(was_training)
        strides = torch.tensor([h / lh for lh, _ in detect.level_sizes], dtype=torch.float32)
        detect.anchors /= strides.view(-1, 1, 1)
        self.stride = strides
        return strides


def from_yaml(path, channels=3, num_classes=None):
    """The model of a YOLOv5 YAML file (hetrain's models/*.yaml), `num_classes` replacing its nc."""
    import yaml
    with open(path) as f:
        cfg = yaml.safe_load(f)
    return YoloModel(cfg, channels, num_classes)
