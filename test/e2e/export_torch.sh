#!/usr/bin/env bash
# A hetrain checkpoint moved to PyTorch computes what hetrain computes. For each zoo model: train 2 steps
# with --checkpoint-dir, let `hetrain eval` dump its first evaluation batch (inputs and logits), convert the
# checkpoint with data_tools/hetrain_to_torch.py, load it with strict=True into data_tools/hetrain_models.py
# (resnet18/50 also straight into torchvision.models) and compare the logits in eval mode. Controls: a
# weight scaled by 1.01 and batch norm in training mode must show up as mismatches, and a checkpoint with
# one flipped bit must be refused.
source "$(dirname "$0")/lib.sh"
type pass >/dev/null 2>&1 || pass() { echo "PASS: $*"; exit 0; }

PY=/usr/bin/python3
$PY -c 'import torch, torchvision, h5py, numpy' 2>/dev/null ||
  fail "missing python3-torch/torchvision/h5py/numpy for $PY: run make deps"
$HETRAIN eval --help >/dev/null 2>&1 || fail "$HETRAIN has no 'eval' command: rebuild (make)"

# Logits agree within RTOL·max|logits| + ATOL: float32 everywhere, but hetrain (im2col + OpenBLAS GEMM,
# its own BN and pooling loops) and PyTorch (oneDNN) sum in different orders, so the last bits differ.
RTOL=1e-4 ATOL=1e-5

# model  C,H,W  classes: small inputs, odd and non-square ones where the model allows them (padding and
# pooling arithmetic, flatten order), one non-RGB resnet18 (its replaced conv1)
MODELS="mlp:2,5,7:7 lenet:1,20,24:10 resnet20:3,10,10:5 resnet18:3,32,32:10 resnet18:1,32,32:4 resnet50:3,32,32:10"

cases=()
for spec in $MODELS; do
  IFS=: read -r model shape classes <<<"$spec"
  tag="$model-${shape//,/x}"
  dir="$TMP/$tag"
  mkdir -p "$dir"
  # A small learning rate: 2 steps at the default one leave running statistics that no longer fit the
  # weights, and eval-mode logits of 1e3 (resnet18) to 1e14 (resnet50), too large for the comparison to
  # see the last layers; at 1e-3 they stay below about 10.
  timeout 300 $HETRAIN train --model "$model" --synthetic 64 --synthetic-shape "$shape" --synthetic-classes "$classes" \
    --global-batch 8 --max-steps 2 --lr 0.001 --checkpoint-dir "$dir/ckpt" --quiet >"$dir/train.log" 2>&1 ||
    { cat "$dir/train.log"; fail "$tag: hetrain train exited non-zero"; }
  ckpt="$dir/ckpt/checkpoint-00000002.h5"
  [ -f "$ckpt" ] || { ls -l "$dir/ckpt"; fail "$tag: no $ckpt after 2 steps"; }
  # eval's synthetic samples take the checkpoint's shape and classes
  timeout 300 $HETRAIN eval --checkpoint "$ckpt" --synthetic 16 --dump-batch "$dir/batch.h5" --quiet >"$dir/eval.log" 2>&1 ||
    { cat "$dir/eval.log"; fail "$tag: hetrain eval exited non-zero"; }
  [ -f "$dir/batch.h5" ] || fail "$tag: hetrain eval wrote no --dump-batch file"
  $PY data_tools/hetrain_to_torch.py "$ckpt" -o "$dir/model.pt" >"$dir/convert.log" 2>&1 ||
    { cat "$dir/convert.log"; fail "$tag: hetrain_to_torch.py refused hetrain's own checkpoint"; }
  cases+=("$tag:$model:$ckpt:$dir/model.pt:$dir/batch.h5")
done

# Compare, with the controls, for every model.
$PY - "$RTOL" "$ATOL" "${cases[@]}" <<'PY' || fail "PyTorch's logits differ from hetrain's (or a control passed)"
import sys, h5py, numpy as np, torch, torchvision
sys.path.insert(0, "data_tools")
import hetrain_models
torch.set_num_threads(1)
rtol, atol = float(sys.argv[1]), float(sys.argv[2])
ok = True

def within(got, want):
    worst = (got - want).abs().max().item()
    allowed = rtol * want.abs().max().item() + atol
    return worst, allowed, bool(np.isfinite(worst)) and worst <= allowed

for case in sys.argv[3:]:
    tag, name, ckpt, pt, batch = case.split(":")
    with h5py.File(batch, "r") as f:
        x = torch.from_numpy(f["inputs"][()])
        want = torch.from_numpy(f["logits"][()])
        labels = f["labels"][()]
    with h5py.File(ckpt, "r") as f:
        shape, k, step = [int(v) for v in f.attrs["input_shape"]], int(f.attrs["num_classes"]), int(f.attrs["global_step"])
    problems = []
    if x.dtype != torch.float32 or list(x.shape[1:]) != shape or want.shape != (x.shape[0], k) or len(labels) != x.shape[0]:
        problems.append("dump has inputs %s %s, logits %s, %d labels" % (x.dtype, list(x.shape), list(want.shape), len(labels)))
    sd = torch.load(pt)
    model = hetrain_models.build(name, shape, k)
    if list(sd) != list(model.state_dict()):
        problems.append("state_dict keys are not in the module's order")
    steps = {int(t) for key, t in sd.items() if key.endswith("num_batches_tracked")}
    if steps and steps != {step}:
        problems.append("num_batches_tracked %s, global_step %d" % (sorted(steps), step))
    model.load_state_dict(sd, strict=True)
    model.eval()
    with torch.no_grad():
        got = model(x)
        worst, allowed, good = within(got, want)
        line = "%-18s %2d samples, max|logits| %.3g, max |diff| %.3g (allowed %.3g)" % (
            tag, x.shape[0], want.abs().max().item(), worst, allowed)
        if not good:
            problems.append("logits differ")
        if shape[0] == 3 and name in ("resnet18", "resnet50"):
            tv = getattr(torchvision.models, name)(num_classes=k)
            tv.load_state_dict(sd, strict=True)
            tv.eval()
            worst_tv, _, good_tv = within(tv(x), want)
            line += ", torchvision %.3g" % worst_tv
            if not good_tv:
                problems.append("torchvision's logits differ")
        # Controls: the first and the last weight scaled by 1.01 must be seen; so must batch norm in
        # training mode (batch statistics instead of the running ones).
        weights = [n for n, _ in model.named_parameters() if n.endswith("weight")]
        for key in (weights[0], weights[-1]):
            p = model.get_parameter(key)
            p.mul_(1.01)
            worst_p, _, good_p = within(model(x), want)
            p.div_(1.01)
            line += "; %s x1.01: %.3g" % (key, worst_p)
            if good_p:
                problems.append("control: scaling %s by 1.01 was not detected" % key)
        if any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()):
            model.train()
            worst_t, _, good_t = within(model(x), want)
            line += "; train-mode BN: %.3g" % worst_t
            if good_t:
                problems.append("control: batch statistics gave the same logits as the running ones")
    print(line + ("" if not problems else "  <- " + "; ".join(problems)))
    ok = ok and not problems
sys.exit(0 if ok else 1)
PY

# hetrain_models.load() takes the checkpoint itself (verified) and the converted file alike.
IFS=: read -r tag name ckpt pt batch <<<"${cases[2]}"
$PY - "$ckpt" "$pt" <<'PY' || fail "hetrain_models.load gave different models for the checkpoint and the .pt"
import sys, torch
sys.path.insert(0, "data_tools")
import hetrain_models
a, b = hetrain_models.load(sys.argv[1]), hetrain_models.load(sys.argv[2])
assert not a.training and not b.training
sa, sb = a.state_dict(), b.state_dict()
assert list(sa) == list(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
PY

# A corrupted checkpoint: one bit of one stored float32 changed in place (h5py), shapes and types intact.
cp "$ckpt" "$TMP/corrupt.h5"
$PY - "$TMP/corrupt.h5" <<'PY' || fail "could not corrupt the copy"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    d = f["parameters"][sorted(f["parameters"])[-1]]
    a = d[()]
    raw = a.reshape(-1).view(np.uint8).copy()
    raw[len(raw) // 2] ^= 0x10
    d[...] = raw.view(np.float32).reshape(a.shape)
PY
if $PY data_tools/hetrain_to_torch.py "$TMP/corrupt.h5" -o "$TMP/corrupt.pt" >"$TMP/corrupt.log" 2>&1; then
  fail "the converter accepted a checkpoint with a flipped bit"
fi
cat "$TMP/corrupt.log"
grep -q "corrupt.h5: checksum mismatch" "$TMP/corrupt.log" || fail "the refusal does not name the file and the checksum"
[ "$(wc -l <"$TMP/corrupt.log")" = 1 ] || fail "the refusal is not one line"
[ ! -e "$TMP/corrupt.pt" ] || fail "the converter wrote output for a refused checkpoint"

# A YOLOv5 YAML detector: its keys are YOLOv5's (model.N.*), the converter adds YOLOv5's Detect anchors
# buffer in stride units, and data_tools/yolov5_yaml.py with the exported weights computes hetrain's head
# rows (hetrain eval --dump-batch) on the images as hetrain saw them (pixels / 255).
det="$TMP/yolov5n"
mkdir -p "$det"
$PACK detect-synthetic --size 64 --max-items 2 --seed 3 --no-progress --count 32 --split train -o "$det/data.h5" \
  >/dev/null || fail "packing detection data"
timeout 300 $HETRAIN train --model models/yolov5n.yaml --data "$det/data.h5" --global-batch 8 --max-steps 2 --lr 0.001 \
  --checkpoint-dir "$det/ckpt" --device cpu --quiet >"$det/train.log" 2>&1 || { cat "$det/train.log"; fail "yolov5n: training failed"; }
timeout 300 $HETRAIN eval --checkpoint "$det/ckpt/checkpoint-00000002.h5" --data "$det/data.h5" --batch 6 --device cpu \
  --dump-batch "$det/batch.h5" --quiet >"$det/eval.log" 2>&1 || { cat "$det/eval.log"; fail "yolov5n: eval --dump-batch failed"; }
$PY data_tools/hetrain_to_torch.py "$det/ckpt/checkpoint-00000002.h5" -o "$det/model.pt" >"$det/convert.log" 2>&1 ||
  { cat "$det/convert.log"; fail "yolov5n: hetrain_to_torch.py refused the detector's checkpoint"; }
$PY - "$RTOL" "$ATOL" "$det/model.pt" "$det/batch.h5" <<'PY' || fail "the exported yolov5n does not compute hetrain's rows"
import sys, h5py, numpy as np, torch
sys.path.insert(0, "data_tools")
import hetrain_models
torch.set_num_threads(1)
rtol, atol = float(sys.argv[1]), float(sys.argv[2])
sd = torch.load(sys.argv[3])
meta = sd.hetrain
model = hetrain_models.build(meta["model"], meta["input_shape"], meta["num_classes"])
model.load_state_dict(sd, strict=True)
assert list(sd)[0] == "model.0.conv.weight", list(sd)[:3]
anchors = sd["model.24.anchors"]
assert torch.allclose(anchors[0, 0], torch.tensor([10 / 8, 13 / 8])), anchors  # YOLOv5's P3/8 anchor, stride units
with h5py.File(sys.argv[4], "r") as f:
    x, want = torch.from_numpy(f["inputs"][()]), torch.from_numpy(f["logits"][()])
assert x.shape[0] == 6 and want.shape == (6, 3 * (8 * 8 + 4 * 4 + 2 * 2), 5 + meta["num_classes"]), want.shape
assert 0 <= float(x.min()) and float(x.max()) <= 1, "inputs are not pixels / 255"
with torch.no_grad():
    got = model.eval()(x)
    worst, allowed = (got - want).abs().max().item(), rtol * want.abs().max().item() + atol
    print("yolov5n rows: max |diff| %.3g (allowed %.3g)" % (worst, allowed))
    control = (model.train()(x) - want).abs().max().item()
print("control, batch norm in training mode: %.3g" % control)
sys.exit(0 if worst <= allowed and control > allowed else 1)
PY

pass "${#cases[@]} checkpoints and a yolov5n one converted to PyTorch give hetrain's logits and head rows within ${RTOL}·max + ${ATOL};" \
  "a 1% change of the first or last weight and train-mode BN are detected; a flipped bit is refused"
