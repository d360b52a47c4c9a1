#!/usr/bin/python3
"""A PyTorch reference for hetrain's detector training: the same model, data, recipe and scoring.

    bench/yolov5_reference.py --train train.h5 --test test.h5 --model models/yolov5n.yaml --batch 32 \
        --epochs 6 --lr 0.06 --warmup-epochs 1 --seed 1 --hetrain build/bin/hetrain

  model       data_tools/yolov5_yaml.py's torch.nn network of the YAML file, initialised as YOLOv5 (and hetrain)
              do: PyTorch's default convolutions, batch norm eps 1e-3 / momentum 0.03, the Detect biases'
              priors log(8/(640/s)^2) (objectness) and log(0.6/(nc - 0.99999)) (classes)
  data        hetrain's HDF5 files read with h5py: pixels / 255, every epoch a seeded permutation in steps of
              --batch (the last partial batch dropped, as hetrain's default), no augmentation
  loss        YOLOv5's ComputeLoss written here from its documented formulas (docs/detection.md, "Loss and
              targets"): anchor matching with ratio < 4 and two neighbour cells, CIoU box loss, objectness
              BCE towards the detached CIoU with level balance (4, 1, 0.4), class BCE; gains 0.05, 0.5 and 1
              scaled to the head and image as YOLOv5's train.py does. The backward is of 64 x that loss (the
              gradient hetrain's detector step leaves: a nominal batch of 64)
  optimizer   SGD, momentum --momentum, Nesterov, weight decay on the convolution weights only (hetrain's
              --no-bn-decay), hetrain's schedule: linear warm-up over --warmup-epochs, then cosine to 0 per step
  scoring     after every epoch the weights go to a hetrain weights file (data_tools/torch_to_hetrain.py) and
              `hetrain eval --weights` scores them: the same NMS and COCO mAP as hetrain's own validation

Before training it checks its loss against hetrain's on the same weights and images: hetrain trains one step
from those weights (--init-from) on the first --batch test images, whose batch loss its metrics file records,
and this script computes the loss of the same images in training mode. Prints, per epoch,
"epoch E: mAP@0.5 X, mAP@0.5:0.95 Y". Exits 3 with a line starting "SKIP" when torch, h5py or yaml is missing.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as e:
    print(f"SKIP: cannot import torch, h5py or numpy ({e})")
    sys.exit(3)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "data_tools"))
import torch_to_hetrain  # noqa: E402
import yolov5_yaml  # noqa: E402

NOMINAL_BATCH = 64  # hetrain's kDetectionNominalBatch (src/train/detection.hpp)


# ------------------------------------------------------------------------------------------------ data
def load(path):
    with h5py.File(path, "r") as f:
        images = f["images"][()]
        offsets = f["box_offsets"][()]
        boxes = f["boxes"][()]
        classes = int(f.attrs["num_classes"])
    return images, offsets, boxes, classes


def batch_targets(offsets, boxes, indices):
    """[M, 6] rows (image in batch, class, cx, cy, w, h) of the images `indices`."""
    rows = []
    for i, k in enumerate(indices):
        b = boxes[offsets[k]:offsets[k + 1]]
        if len(b):
            rows.append(np.concatenate([np.full((len(b), 1), i, np.float32), b], 1))
    return torch.from_numpy(np.concatenate(rows) if rows else np.zeros((0, 6), np.float32))


# ------------------------------------------------------------------------------------------------ loss
def ciou(box1, box2, eps=1e-7):
    """Complete IoU of (cx, cy, w, h) boxes, row by row; the aspect term's alpha without gradient."""
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
    b1x1, b1x2, b1y1, b1y2 = x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2
    b2x1, b2x2, b2y1, b2y2 = x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2
    inter = (torch.min(b1x2, b2x2) - torch.max(b1x1, b2x1)).clamp(0) * \
            (torch.min(b1y2, b2y2) - torch.max(b1y1, b2y1)).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = torch.max(b1x2, b2x2) - torch.min(b1x1, b2x1)
    ch = torch.max(b1y2, b2y2) - torch.min(b1y1, b2y1)
    c2 = cw ** 2 + ch ** 2 + eps
    rho2 = ((b2x1 + b2x2 - b1x1 - b1x2) ** 2 + (b2y1 + b2y2 - b1y1 - b1y2) ** 2) / 4
    v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return (iou - (rho2 / c2 + v * alpha)).squeeze(-1)


class YoloLoss:
    """YOLOv5's detection loss of a batch (box + obj + cls, each a mean as YOLOv5 takes it)."""

    def __init__(self, model, image_h, image_w, anchor_t=4.0):
        detect = model.model[-1]
        self.nc, self.na, self.no = detect.nc, detect.na, detect.no
        self.anchors = detect.anchors  # [levels, na, 2], stride units
        self.strides = [float(s) for s in model.stride]
        self.nl = len(self.strides)
        self.sizes = [(int(image_h / s), int(image_w / s)) for s in self.strides]
        self.anchor_t = anchor_t
        self.balance = [4.0, 1.0, 0.4] if self.nl == 3 else [4.0, 1.0, 0.25, 0.06, 0.02][:self.nl]
        per_level = 3.0 / self.nl
        self.box_gain = 0.05 * per_level
        self.cls_gain = 0.5 * self.nc / 80.0 * per_level
        self.obj_gain = 1.0 * (image_h * image_w / 640.0 ** 2) * per_level
        self.bce = nn.BCEWithLogitsLoss()

    def levels(self, rows):
        out, start = [], 0
        for gh, gw in self.sizes:
            n = self.na * gh * gw
            out.append(rows[:, start:start + n].view(rows.shape[0], self.na, gh, gw, self.no))
            start += n
        return out

    def build_targets(self, preds, targets):
        nt = targets.shape[0]
        gain = torch.ones(7)
        ai = torch.arange(self.na, dtype=torch.float32).view(self.na, 1).repeat(1, nt)
        t_all = torch.cat((targets.repeat(self.na, 1, 1), ai[:, :, None]), 2)  # [na, nt, 7]
        g = 0.5
        off = torch.tensor([[0, 0], [1, 0], [0, 1], [-1, 0], [0, -1]], dtype=torch.float32) * g
        result = []
        for i, p in enumerate(preds):
            anchors = self.anchors[i]
            _, _, gh, gw, _ = p.shape
            gain[2:6] = torch.tensor([gw, gh, gw, gh], dtype=torch.float32)
            t = t_all * gain
            if nt:
                r = t[..., 4:6] / anchors[:, None]
                keep = torch.max(r, 1 / r).max(2)[0] < self.anchor_t
                t = t[keep]
                gxy = t[:, 2:4]
                gxi = gain[[2, 3]] - gxy
                j, k = ((gxy % 1 < g) & (gxy > 1)).T
                l, m = ((gxi % 1 < g) & (gxi > 1)).T
                sel = torch.stack((torch.ones_like(j), j, k, l, m))
                t = t.repeat((5, 1, 1))[sel]
                offsets = (torch.zeros_like(gxy)[None] + off[:, None])[sel]
            else:
                t = t_all[0]
                offsets = 0
            image_class, gxy, gwh, a = t[:, :2], t[:, 2:4], t[:, 4:6], t[:, 6].long()
            b, c = image_class.long().T
            gij = (gxy - offsets).long()
            gij[:, 0].clamp_(0, gw - 1)
            gij[:, 1].clamp_(0, gh - 1)
            result.append((b, a, gij[:, 1], gij[:, 0], torch.cat((gxy - gij, gwh), 1), anchors[a], c))
        return result

    def __call__(self, rows, targets):
        preds = self.levels(rows)
        lbox, lobj, lcls = torch.zeros(()), torch.zeros(()), torch.zeros(())
        for i, (p, (b, a, gj, gi, tbox, anchors, tcls)) in enumerate(zip(preds, self.build_targets(preds, targets))):
            tobj = torch.zeros(p.shape[:4], dtype=p.dtype)
            n = b.shape[0]
            if n:
                pxy, pwh, _, pcls = p[b, a, gj, gi].split((2, 2, 1, self.nc), 1)
                pxy = pxy.sigmoid() * 2 - 0.5
                pwh = (pwh.sigmoid() * 2) ** 2 * anchors
                iou = ciou(torch.cat((pxy, pwh), 1), tbox)
                lbox = lbox + (1.0 - iou).mean()
                tobj[b, a, gj, gi] = iou.detach().clamp(0).type(tobj.dtype)
                if self.nc > 1:
                    t = torch.zeros_like(pcls)
                    t[range(n), tcls] = 1.0
                    lcls = lcls + self.bce(pcls, t)
            lobj = lobj + self.bce(p[..., 4], tobj) * self.balance[i]
        return lbox * self.box_gain + lobj * self.obj_gain + lcls * self.cls_gain


# ------------------------------------------------------------------------------------------------ model
def build_model(yaml_path, channels, classes, h, w, seed):
    torch.manual_seed(seed)
    model = yolov5_yaml.from_yaml(yaml_path, channels, classes)
    strides = model.measure_strides(h, w)
    detect = model.model[-1]
    with torch.no_grad():  # YOLOv5's Detect._initialize_biases (640 px whatever the input)
        for conv, s in zip(detect.m, strides):
            b = conv.bias.view(detect.na, -1)
            b[:, 4] += math.log(8 / (640 / float(s)) ** 2)
            b[:, 5:5 + detect.nc] += math.log(0.6 / (detect.nc - 0.99999))
    return model


def parameter_groups(model, weight_decay):
    decay, no_decay = [], []
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            (decay if name == "weight" and isinstance(module, nn.Conv2d) else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_at(step, peak, warmup, total):
    if step < warmup:
        return peak * (step + 1) / warmup
    span = total - warmup
    return 0.0 if span <= 0 else 0.5 * peak * (1 + math.cos(math.pi * min(1.0, (step - warmup) / span)))


# ------------------------------------------------------------------------------------------------ hetrain
def hetrain_eval(hetrain, weights, yaml_path, test, threads):
    out = subprocess.run([hetrain, "eval", "--weights", weights, "--model", yaml_path, "--data", test, "--device",
                          "cpu", "--threads", str(threads), "--quiet"], capture_output=True, text=True, check=True)
    fields = out.stdout.split()
    return float(fields[fields.index("mAP@0.5") + 1]), float(fields[fields.index("mAP@0.5:0.95") + 1])


def save_weights(model, path):
    torch_to_hetrain.write_weights(model.state_dict(), "bench/yolov5_reference.py", path)


def loss_check(args, model, tmp):
    """hetrain's loss of the first --batch test images against this script's, from the same weights."""
    images, offsets, boxes, _ = load(args.test)
    n = min(args.batch, len(images))
    subset = os.path.join(tmp, "check.h5")
    with h5py.File(args.test, "r") as src, h5py.File(subset, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        dst.attrs["num_samples"] = n
        dst.attrs["num_boxes"] = int(offsets[n])
        dst["images"], dst["labels"] = src["images"][:n], src["labels"][:n]
        dst["box_offsets"], dst["boxes"] = offsets[:n + 1], boxes[:offsets[n]]
    weights = os.path.join(tmp, "init.h5")
    save_weights(model, weights)
    metrics = os.path.join(tmp, "check.jsonl")
    subprocess.run([args.hetrain, "train", "--model", args.model, "--data", subset, "--global-batch", str(n),
                    "--max-steps", "1", "--lr", "1e-9", "--device", "cpu", "--no-augment", "--init-from", weights,
                    "--metrics", metrics,
                    "--quiet"], check=True, capture_output=True, text=True)
    with open(metrics) as f:
        theirs = [json.loads(line) for line in f if line.strip()][0]["loss"]
    copy = yolov5_yaml.from_yaml(args.model, images.shape[1], model.model[-1].nc)
    copy.measure_strides(images.shape[2], images.shape[3])
    copy.load_state_dict(model.state_dict())
    copy.train()
    x = torch.from_numpy(images[:n]).float() / 255
    with torch.no_grad():
        mine = float(YoloLoss(copy, images.shape[2], images.shape[3])(copy(x), batch_targets(offsets, boxes, range(n))))
    return mine, theirs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--model", default="models/yolov5n.yaml")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--lr", type=float, default=0.06)
    p.add_argument("--momentum", type=float, default=0.937)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--warmup-epochs", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--hetrain", default="build/bin/hetrain")
    args = p.parse_args()
    torch.set_num_threads(args.threads)

    images, offsets, boxes, classes = load(args.train)
    n, c, h, w = images.shape
    model = build_model(args.model, c, classes, h, w, args.seed)
    loss_fn = YoloLoss(model, h, w)
    with tempfile.TemporaryDirectory(prefix="hetrain-reference-") as tmp:
        mine, theirs = loss_check(args, model, tmp)
        print(f"loss check (same weights, the first {args.batch} test images, training mode): this script "
              f"{mine:.6f}, hetrain {theirs:.6f}, relative difference {abs(mine - theirs) / max(abs(theirs), 1e-12):.2e}",
              flush=True)
        opt = torch.optim.SGD(parameter_groups(model, args.weight_decay), lr=args.lr, momentum=args.momentum,
                              nesterov=True)
        steps_per_epoch = n // args.batch
        total = steps_per_epoch * args.epochs
        warmup = int(args.warmup_epochs * steps_per_epoch)
        gen = torch.Generator().manual_seed(args.seed)
        step = 0
        for epoch in range(1, args.epochs + 1):
            model.train()
            order = torch.randperm(n, generator=gen).numpy()
            for s in range(steps_per_epoch):
                idx = order[s * args.batch:(s + 1) * args.batch]
                x = torch.from_numpy(images[idx]).float() / 255
                loss = loss_fn(model(x), batch_targets(offsets, boxes, idx))
                for group in opt.param_groups:
                    group["lr"] = lr_at(step, args.lr, warmup, total)
                opt.zero_grad(set_to_none=False)
                (NOMINAL_BATCH * loss).backward()
                opt.step()
                step += 1
            weights = os.path.join(tmp, "epoch.h5")
            save_weights(model, weights)
            m50, m5095 = hetrain_eval(args.hetrain, weights, args.model, args.test, args.threads)
            print(f"epoch {epoch}: mAP@0.5 {m50:.4f}, mAP@0.5:0.95 {m5095:.4f} (train loss {float(loss):.4f})", flush=True)


if __name__ == "__main__":
    main()
