#!/usr/bin/python3
"""Training-step throughput of the same models in PyTorch (the reference for bench/train_step_bench.cpp).

The models are written here in plain torch.nn (torchvision is not needed) with hetrain's architecture:
  resnet20: CIFAR ResNet (3 stages x 3 basic blocks, 16/32/64 channels), 1x1 conv + BN projection shortcuts
            where a block changes shape (272,474 parameters for 3 channels and 10 classes);
  resnet18, resnet50: torchvision's ImageNet layout (resnet50 v1.5: the bottleneck's stride on its 3x3
            conv), 11,689,512 and 25,557,032 parameters for 1000 classes;
  lenet, mlp: hetrain's small Fashion-MNIST models (61,706 and 235,146 parameters for 1x28x28, 10 classes).
One step = zero_grad, forward, cross-entropy, backward, SGD (momentum 0.9, weight decay 5e-4), on one fixed
random batch. Warm-up steps are untimed. Prints one key=value line, like bench_train_step.

Usage: pytorch_train_step.py --model resnet20 --size 32 --batch 128 --threads 1 --warmup 2 --steps 5
                             [--device cpu|cuda] [--precision fp32|tf32|bf16|fp16 | --tf32 0|1]
--device cuda: model and the fixed batch on GPU 0, fp32 parameters, NCHW (contiguous) memory format;
torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32 both on at --precision tf32 only
(--tf32 1 and 0 are the older spellings of tf32 and fp32); at bf16 and fp16, forward and loss run under
torch.autocast('cuda', dtype=torch.bfloat16 / torch.float16) — PyTorch's own mixed precision, the counterpart
of hetrain's 16-bit convolutions and dense layers — and fp16 steps through a torch.cuda.amp.GradScaler;
cudnn.benchmark on (cuDNN algorithms measured per shape, as hetrain's cudnnFind* choice); the clock is read
after torch.cuda.synchronize(). The line then also has device=cuda tf32=0|1 precision=fp32|tf32|bf16|fp16,
dev_mem_mb (the drop in the GPU's free memory from before the model was moved to after the timed steps, the
same measure as bench_train_step's) and gpu=NAME (spaces as '_'), last. On the CPU --precision is ignored
(fp32), as in bench_train_step.
Exits 3 with a line starting "SKIP" when torch cannot be imported, or with --device cuda when torch sees
no CUDA device.
"""
import argparse
import resource
import sys
import time

try:
    import torch
    import torch.nn as nn
except ImportError as e:  # Debian's python3-torch is optional
    print(f"SKIP: cannot import torch ({e})")
    sys.exit(3)


PRECISIONS = ("fp32", "tf32", "bf16", "fp16")


def bn(c):
    return nn.BatchNorm2d(c)


def projection(cin, cout, stride):
    if stride == 1 and cin == cout:
        return None
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, 0, bias=False), bn(cout))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = bn(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = bn(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = projection(cin, planes, stride)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        short = x if self.downsample is None else self.downsample(x)
        return self.relu(out + short)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, planes, stride):
        super().__init__()
        out = planes * 4
        self.conv1 = nn.Conv2d(cin, planes, 1, 1, 0, bias=False)
        self.bn1 = bn(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)  # v1.5: stride on the 3x3
        self.bn2 = bn(planes)
        self.conv3 = nn.Conv2d(planes, out, 1, 1, 0, bias=False)
        self.bn3 = bn(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = projection(cin, out, stride)

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        short = x if self.downsample is None else self.downsample(x)
        return self.relu(y + short)


def stage(block, cin, planes, blocks, stride):
    layers = []
    for b in range(blocks):
        layers.append(block(cin, planes, stride if b == 0 else 1))
        cin = planes * block.expansion
    return nn.Sequential(*layers), cin


class ResNet20(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, 1, 1, bias=False)
        self.bn1 = bn(16)
        self.relu = nn.ReLU(inplace=True)
        self.layer1, c = stage(BasicBlock, 16, 16, 3, 1)
        self.layer2, c = stage(BasicBlock, c, 32, 3, 2)
        self.layer3, c = stage(BasicBlock, c, 64, 3, 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.pool(x), 1))


class ImageNetResNet(nn.Module):
    """torchvision's ImageNet ResNet layout (7x7 stem, max pool, four stages): resnet18 and resnet50 v1.5."""

    def __init__(self, block, blocks, channels, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 64, 7, 2, 3, bias=False)
        self.bn1 = bn(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1, c = stage(block, 64, 64, blocks[0], 1)
        self.layer2, c = stage(block, c, 128, blocks[1], 2)
        self.layer3, c = stage(block, c, 256, blocks[2], 2)
        self.layer4, c = stage(block, c, 512, blocks[3], 2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class Mlp(nn.Module):
    """hetrain's mlp: flatten, fc256, relu, fc128, relu, fc(classes)."""

    def __init__(self, channels, classes, size):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(channels * size * size, 256), nn.ReLU(),
                                 nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, x):
        return self.net(x)


class LeNet(nn.Module):
    """hetrain's lenet: conv5x5(6, pad 2) relu pool2, conv5x5(16) relu pool2, fc120, fc84, fc(classes)."""

    def __init__(self, channels, classes, size=28):
        super().__init__()
        s = ((size // 2) - 4) // 2
        self.features = nn.Sequential(
            nn.Conv2d(channels, 6, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Conv2d(6, 16, 5, 1, 0), nn.ReLU(), nn.MaxPool2d(2, 2))
        self.classifier = nn.Sequential(
            nn.Linear(16 * s * s, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def make_model(name, channels, classes, size):
    if name == "resnet20":
        return ResNet20(channels, classes)
    if name == "resnet18":
        return ImageNetResNet(BasicBlock, (2, 2, 2, 2), channels, classes)
    if name == "resnet50":
        return ImageNetResNet(Bottleneck, (3, 4, 6, 3), channels, classes)
    if name == "lenet":
        return LeNet(channels, classes, size)
    if name == "mlp":
        return Mlp(channels, classes, size)
    raise SystemExit(f"pytorch_train_step: unknown model '{name}' (mlp, lenet, resnet20, resnet18, resnet50)")


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed_steps(step, warmup, steps, max_seconds, sync=lambda: None):
    """Runs `warmup` untimed steps, then up to `steps` timed ones (fewer once `max_seconds` have passed, at
    least one). Returns (steps done, seconds, the last step's return value); `sync` waits for the device."""
    for _ in range(warmup):
        step()
    sync()
    t0 = time.perf_counter()
    done, last = 0, None
    while done < steps:
        last = step()
        done += 1
        if max_seconds > 0 and time.perf_counter() - t0 > max_seconds:
            break
    sync()
    return done, time.perf_counter() - t0, last


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet20")
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--max-seconds", type=float, default=0, help="stop timing after the step that crosses this")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--precision", choices=PRECISIONS, type=str.lower, default=None,
                   help="cuda: fp32 (default), tf32 (TF32 in cuDNN and matmul), bf16 or fp16 (autocast)")
    p.add_argument("--tf32", type=int, choices=(0, 1), default=None, help="the older switch: 1 = tf32, 0 = fp32")
    a = p.parse_args()
    if a.precision is None:
        a.precision = "tf32" if a.tf32 == 1 else "fp32"
    elif a.tf32 is not None and a.precision != ("tf32" if a.tf32 == 1 else "fp32"):
        p.error(f"--tf32 {a.tf32} contradicts --precision {a.precision}")

    cuda = a.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            built = torch.version.cuda or "none (CPU-only build)"
            print(f"SKIP: torch {torch.__version__} sees no CUDA device (torch CUDA: {built}, "
                  f"device count {torch.cuda.device_count()})")
            sys.exit(3)
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.benchmark = True
        torch.cuda.set_device(0)
        free_before = torch.cuda.mem_get_info(0)[0]
    dev = torch.device(a.device)

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = make_model(a.model, a.channels, a.classes, a.size)
    model = model.to(device=dev, dtype=torch.float32, memory_format=torch.contiguous_format)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, a.channels, a.size, a.size).to(dev).contiguous()  # NCHW, uploaded once
    y = torch.randint(0, a.classes, (a.batch,)).to(dev)
    params = sum(t.numel() for t in model.parameters())
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision) if cuda else None
    scaler = None
    if autocast_dtype == torch.float16:  # torch >= 2.3 spells it torch.amp.GradScaler("cuda"); the old name warns
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()

    def step():
        opt.zero_grad(set_to_none=False)
        if autocast_dtype is None:
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss.item()
        with torch.autocast("cuda", dtype=autocast_dtype):
            loss = loss_fn(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss.item()

    done, seconds, loss = timed_steps(step, a.warmup, a.steps, a.max_seconds, sync)
    extra = ""
    if cuda:
        dev_mem_mb = max(0, free_before - torch.cuda.mem_get_info(0)[0]) / 2**20
        gpu = torch.cuda.get_device_name(0).replace(" ", "_").replace("=", "_")
        tf32 = int(a.precision == "tf32")
        extra = f" device=cuda tf32={tf32} precision={a.precision} dev_mem_mb={dev_mem_mb:.0f} gpu={gpu}"
    print(f"impl=pytorch-{torch.__version__} model={a.model} size={a.size} batch={a.batch} threads={a.threads} "
          f"steps={done} params={params} seconds={seconds:.4f} samples_per_s={a.batch * done / seconds:.3f} "
          f"peak_mb={peak_rss_mib():.1f} loss={loss:.4f}{extra}")


if __name__ == "__main__":
    main()
