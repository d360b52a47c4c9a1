#!/usr/bin/env -S /usr/bin/python3
"""hetrain's model zoo as plain torch.nn modules.

Each model here has exactly the state_dict keys, shapes and dtypes of the tensors in a hetrain checkpoint
(docs/checkpoint-format.md) and, in eval mode, computes the same function as hetrain's model of the same
name (src/nn/zoo.cpp, src/nn/residual.cpp):

  mlp       flatten → fc1 (256) → relu → fc2 (128) → relu → fc3 (K)
  lenet     conv1 5×5 pad 2 (6) → relu → maxpool 2 → conv2 5×5 (16) → relu → maxpool 2 → flatten
            → fc1 (120) → relu → fc2 (84) → relu → fc3 (K)
  resnet20  conv1 3×3 (16, no bias) → bn1 → relu → layer1..3 (3 basic blocks each, 16/32/64 planes,
            stride 1/2/2, 1×1 conv + BN projection where the shape changes) → global average → fc (K)
  resnet18, resnet50
            torchvision.models.resnet18 / resnet50 (num_classes=K); for C != 3 input channels conv1 is
            a 7×7 stride-2 pad-3 convolution of C input channels, as hetrain builds it.

Batch norm everywhere: eps 1e-5, momentum 0.1 (torch's defaults, as in hetrain).

    import hetrain_models
    model = hetrain_models.load("ckpt/checkpoint-00000100.h5")   # or a .pt made by hetrain_to_torch.py
    logits = model(images)                                       # eval mode, float32 [N, C, H, W]

    model = hetrain_models.build("resnet20", (3, 32, 32), 10)    # untrained, train mode

A model file in YOLOv5's YAML format (models/yolov5n.yaml, ...) builds data_tools/yolov5_yaml.py's network,
whose state_dict has YOLOv5's keys; its Detect anchors (a buffer hetrain does not store) are in stride
units, as in YOLOv5's state_dict.
"""

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

MODELS = ("mlp", "lenet", "resnet20", "resnet18", "resnet50")
# Smallest height and width hetrain accepts (src/nn/zoo.cpp).
MIN_SIZE = {"mlp": 1, "lenet": 12, "resnet20": 4, "resnet18": 32, "resnet50": 32}


class MLP(nn.Module):
    def __init__(self, input_shape, num_classes):
        super().__init__()
        c, h, w = input_shape
        self.fc1 = nn.Linear(c * h * w, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = torch.flatten(x, 1)  # [N, C·H·W] in C, H, W order, like hetrain's Flatten
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class LeNet(nn.Module):
    def __init__(self, input_shape, num_classes):
        super().__init__()
        c, h, w = input_shape
        self.conv1 = nn.Conv2d(c, 6, 5, stride=1, padding=2, bias=True)  # same size
        self.conv2 = nn.Conv2d(6, 16, 5, stride=1, padding=0, bias=True)
        h, w = h // 2, w // 2            # maxpool 2×2 stride 2 (floor)
        h, w = h - 4, w - 4              # conv2 5×5, no padding
        h, w = h // 2, w // 2            # maxpool
        self.fc1 = nn.Linear(16 * h * w, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class BasicBlock(nn.Module):
    """relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); the shortcut is the identity, or
    downsample = 1×1 conv (stride s, no bias) + BN where the stride or the channel count changes."""

    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes, eps=1e-5, momentum=0.1)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes, eps=1e-5, momentum=0.1)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(
                nn.Conv2d(inplanes, planes, 1, stride=stride, padding=0, bias=False),
                nn.BatchNorm2d(planes, eps=1e-5, momentum=0.1))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


class ResNet20(nn.Module):
    """He et al. 2016, CIFAR variant (n = 3), projection shortcuts, as hetrain's build_resnet20."""

    def __init__(self, input_shape, num_classes):
        super().__init__()
        c = input_shape[0]
        self.conv1 = nn.Conv2d(c, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16, eps=1e-5, momentum=0.1)
        self.layer1 = self._stage(16, 16, 1)
        self.layer2 = self._stage(16, 32, 2)
        self.layer3 = self._stage(32, 64, 2)
        self.fc = nn.Linear(64, num_classes)

    @staticmethod
    def _stage(inplanes, planes, stride, blocks=3):
        layers = []
        for b in range(blocks):
            layers.append(BasicBlock(inplanes if b == 0 else planes, planes, stride if b == 0 else 1))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        x = torch.mean(x, dim=(2, 3))  # global average pool
        return self.fc(x)


def _torchvision_resnet(name, in_channels, num_classes):
    import torchvision
    model = getattr(torchvision.models, name)(num_classes=num_classes)
    if in_channels != 3:  # same name, same place in the state_dict
        model.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
    return model


def is_yaml(name):
    return name.endswith(".yaml") or name.endswith(".yml")


def find_model_file(name, near=None):
    """The YAML file a checkpoint's `model` names: the path itself, else a file of that base name next to
    `near` (a checkpoint), in this checkout's models/ or an installation's share/hetrain/models/."""
    if os.path.isfile(name):
        return name
    here = os.path.dirname(os.path.abspath(__file__))
    places = [os.path.dirname(os.path.abspath(near))] if near else []
    places += [os.path.join(here, "..", "models")]
    for place in places:
        candidate = os.path.join(place, os.path.basename(name))
        if os.path.isfile(candidate):
            return candidate
    raise ValueError("cannot find the model file %s (looked in %s): pass it with --model-file" % (
        name, ", ".join(os.path.normpath(p) for p in ["."] + places)))


def build(name, input_shape, num_classes, model_file=None):
    """An untrained model (train mode) for hetrain's --model NAME, input [C, H, W] and K classes. For a
    YAML model, `model_file` is where the file is when NAME's path does not lead to it."""
    input_shape = tuple(int(v) for v in input_shape)
    num_classes = int(num_classes)
    if is_yaml(name):
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.insert(0, here)
        import yolov5_yaml
        if len(input_shape) != 3 or min(input_shape) < 1:
            raise ValueError("%s: input shape must be [C, H, W] with positive sizes, got %s" % (name, list(input_shape)))
        model = yolov5_yaml.from_yaml(model_file or find_model_file(name), input_shape[0], num_classes)
        model.measure_strides(input_shape[1], input_shape[2])
        return model
    if name not in MODELS:
        raise ValueError("unknown model '%s' (known: %s)" % (name, ", ".join(MODELS)))
    if len(input_shape) != 3 or min(input_shape) < 1:
        raise ValueError("%s: input shape must be [C, H, W] with positive sizes, got %s" % (name, list(input_shape)))
    if min(input_shape[1:]) < MIN_SIZE[name]:
        raise ValueError("%s: input must be at least %d×%d, got %d×%d" %
                         (name, MIN_SIZE[name], MIN_SIZE[name], input_shape[1], input_shape[2]))
    if num_classes < 1:
        raise ValueError("%s: num_classes must be >= 1, got %d" % (name, num_classes))
    if name == "mlp":
        return MLP(input_shape, num_classes)
    if name == "lenet":
        return LeNet(input_shape, num_classes)
    if name == "resnet20":
        return ResNet20(input_shape, num_classes)
    return _torchvision_resnet(name, input_shape[0], num_classes)


def _is_hdf5(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89HDF\r\n\x1a\n"


def _infer_meta(state_dict, path):
    """model, input shape and classes of a state_dict without hetrain's metadata (as far as the keys tell)."""
    keys = set(state_dict)
    if "layer4.0.conv3.weight" in keys:
        name = "resnet50"
    elif "layer4.0.conv1.weight" in keys:
        name = "resnet18"
    elif "layer3.0.conv1.weight" in keys:
        name = "resnet20"
    elif "conv2.weight" in keys and "fc3.weight" in keys:
        name = "lenet"
    elif "fc3.weight" in keys:
        name = "mlp"
    else:
        raise ValueError("%s: not a state_dict of a hetrain model (no fc3.weight or layerN.* keys)" % path)
    if name in ("mlp", "lenet"):
        raise ValueError("%s: %s state_dict without hetrain metadata: the input shape is unknown "
                         "(convert with hetrain_to_torch.py, or call build() and load_state_dict())" % (path, name))
    num_classes = state_dict["fc.weight"].shape[0]
    c = state_dict["conv1.weight"].shape[1]
    return {"model": name, "input_shape": [c, MIN_SIZE[name], MIN_SIZE[name]], "num_classes": num_classes}


def load(path, model_file=None):
    """The model of a hetrain checkpoint (.h5, verified) or of a state_dict saved by hetrain_to_torch.py,
    with its tensors loaded (strict), in eval mode. `model_file`: a YAML model's file, when the path the
    checkpoint names does not lead to it."""
    if _is_hdf5(path):
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.insert(0, here)
        import hetrain_to_torch
        meta, state_dict = hetrain_to_torch.read_checkpoint(path, model_file=model_file)
    else:
        state_dict = torch.load(path, map_location="cpu")
        if not isinstance(state_dict, dict):
            raise ValueError("%s: expected a state_dict, got %s" % (path, type(state_dict).__name__))
        meta = getattr(state_dict, "hetrain", None) or _infer_meta(state_dict, path)
    if model_file is None and is_yaml(meta["model"]):
        model_file = find_model_file(meta["model"], near=path)
    model = build(meta["model"], meta["input_shape"], meta["num_classes"], model_file)
    model.load_state_dict(state_dict, strict=True)
    return model.eval()
