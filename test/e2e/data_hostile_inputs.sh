#!/usr/bin/env bash
# Hostile images and full disks (docs/dataset-format.md, "Writing it safely", its paragraph on hostile input; docs/checkpoint-format.md):
# hetrain-pack refuses a JPEG whose header claims 65000x65000 before any large allocation (run under a
# 2 GB address-space limit, peak RSS measured where /usr/bin/time exists), reads a PNG named .jpg as a PNG,
# refuses a COCO file_name that names a FIFO (no hang) or holds a NUL, quotes a name with a newline; on a
# 2 MB tmpfs, hetrain-pack folder --store jpeg, torch_to_hetrain.py and hetrain_to_torch.py each print one
# line, exit non-zero and leave nothing at the output's name. torch_to_hetrain.py reads with
# weights_only=True (a crafted .pt does not run its command; --trust-file turns the full unpickler on),
# converts bfloat16 and refuses a tensor holding NaN/Inf, writing nothing.
source "$(dirname "$0")/lib.sh"
need_python numpy PIL torch h5py
/usr/bin/python3 - "$TMP" <<'PY' || fail "crafting the inputs failed"
import json, os, sys
import numpy as np
from PIL import Image
t = sys.argv[1]
rng = np.random.default_rng(1)
def img(path, fmt="JPEG"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(path, format=fmt)
img(t + "/bomb/b/ok.jpg")
img(t + "/bomb/a/big.jpg")
d = bytearray(open(t + "/bomb/a/big.jpg", "rb").read())
sof = d.find(b"\xff\xc0")
assert sof > 0
d[sof + 5:sof + 9] = (65000).to_bytes(2, "big") * 2  # height, width
open(t + "/bomb/a/big.jpg", "wb").write(d)
img(t + "/png/a/really-a-png.jpg", "PNG")
img(t + "/png/b/y.jpg")
img(t + "/coco/img/ok.jpg")
os.mkfifo(t + "/coco/img/fifo.jpg")
for name, fn in (("fifo", "fifo.jpg"), ("nul", "ok\u0000.jpg"), ("newline", "bad\nname.jpg")):
    json.dump({"images": [{"id": 1, "file_name": fn, "width": 48, "height": 40}],
               "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 10, 10]}],
               "categories": [{"id": 1, "name": "x"}]}, open("%s/coco/%s.json" % (t, name), "w"))
# Photo-sized JPEGs (about 1 MB stored at 224) for the full disk.
for k in range(24):
    os.makedirs("%s/photos/c%d" % (t, k % 2), exist_ok=True)
    y, x = np.mgrid[0:375, 0:500]
    a = np.stack([(x * (k + 1) % 256), (y * 3 % 256), ((x + y) % 256)], -1).astype(np.uint8)
    a = np.clip(a.astype(int) + rng.integers(-40, 40, a.shape), 0, 255).astype(np.uint8)
    Image.fromarray(a).save("%s/photos/c%d/p%02d.jpg" % (t, k % 2, k), quality=90)
PY

# one_line_error NAME RC ERRFILE [NEEDLE]: non-zero exit, exactly one line on stderr, no crash, the needle.
one_line_error() {
  local what=$1 rc=$2 err=$3 needle=${4:-}
  [ "$rc" -ne 0 ] || fail "$what: exit 0"
  [ "$rc" -lt 128 ] || { cat "$err"; fail "$what: killed by a signal (exit $rc)"; }
  [ "$(grep -c . "$err")" -eq 1 ] || { cat "$err"; fail "$what: not one line of error"; }
  grep -qiE "traceback|segmentation|HDF5-DIAG|terminate called" "$err" && { cat "$err"; fail "$what: a crash or dump"; }
  [ -z "$needle" ] || grep -qF -- "$needle" "$err" || { cat "$err"; fail "$what: no '$needle' in the error"; }
}

# 1. The 65000x65000 header: refused before decoding, raw and JPEG storage, within 2 GB of address space.
for store in raw jpeg; do
  ( ulimit -v 2000000
    if [ -x /usr/bin/time ]; then
      /usr/bin/time -f "%M" -o "$TMP/rss" timeout 60 $PACK folder "$TMP/bomb" --size 32 --store $store \
        -o "$TMP/bomb-$store.h5" --no-progress
    else
      timeout 60 $PACK folder "$TMP/bomb" --size 32 --store $store -o "$TMP/bomb-$store.h5" --no-progress
    fi ) >/dev/null 2>"$TMP/err"
  rc=$?
  grep -v "^[0-9]*$" "$TMP/err" | grep -v "^Command exited" >"$TMP/err1"
  one_line_error "bomb ($store)" $rc "$TMP/err1" "big.jpg: the image is 65000x65000 (4225000000 pixels), more than --max-pixels 89478485"
  [ -e "$TMP/bomb-$store.h5" ] && fail "bomb ($store): an output was written"
  [ -s "$TMP/rss" ] && echo "bomb ($store): refused, peak RSS $(tail -1 "$TMP/rss") KB"
done
# A lower limit refuses an ordinary image; 0 turns the limit off (the bomb then fails on its data, not memory).
$PACK folder "$TMP/png" --size 32 --max-pixels 1000 -o "$TMP/lim.h5" --no-progress >/dev/null 2>"$TMP/err"
one_line_error "--max-pixels 1000" $? "$TMP/err" "more than --max-pixels 1000"
$PACK folder "$TMP/png" --size 32 --max-pixels -1 -o "$TMP/lim.h5" --no-progress >/dev/null 2>"$TMP/err"
one_line_error "--max-pixels -1" $? "$TMP/err" "--max-pixels must be 0 (no limit) or positive"
$PACK folder --help | grep -q -- "--max-pixels" || fail "--max-pixels is not in hetrain-pack folder --help"
$PACK coco --help | grep -q -- "--max-pixels" || fail "--max-pixels is not in hetrain-pack coco --help"

# 2. A PNG named .jpg packs, raw and as JPEG storage.
for store in raw jpeg; do
  $PACK folder "$TMP/png" --size 32 --store $store -o "$TMP/png-$store.h5" --no-progress >/dev/null 2>"$TMP/err" \
    || { cat "$TMP/err"; fail "a PNG named .jpg ($store) did not pack"; }
  $PACK inspect "$TMP/png-$store.h5" --verify >/dev/null || fail "inspect --verify of the PNG-named-.jpg pack ($store)"
done

# 3. COCO: a FIFO is refused at once (no hang), a NUL is refused, a newline is quoted.
timeout 20 $PACK coco --images "$TMP/coco/img" --annotations "$TMP/coco/fifo.json" --size 32 -o "$TMP/c.h5" \
  --no-progress >/dev/null 2>"$TMP/err"
rc=$?; [ $rc -eq 124 ] && fail "coco: a FIFO file_name hangs"
one_line_error "coco FIFO" $rc "$TMP/err" "fifo.jpg: not a regular file (a FIFO)"
$PACK coco --images "$TMP/coco/img" --annotations "$TMP/coco/nul.json" --size 32 -o "$TMP/c.h5" --no-progress \
  >/dev/null 2>"$TMP/err"
one_line_error "coco NUL" $? "$TMP/err" "file_name 'ok\\x00.jpg' holds a NUL byte"
$PACK coco --images "$TMP/coco/img" --annotations "$TMP/coco/newline.json" --size 32 -o "$TMP/c.h5" --no-progress \
  >/dev/null 2>"$TMP/err"
one_line_error "coco newline" $? "$TMP/err" "bad\\nname.jpg': cannot open"
[ -e "$TMP/c.h5" ] && fail "coco: an output was written"

# 4. torch_to_hetrain.py: weights_only, --trust-file, bfloat16, NaN/Inf.
/usr/bin/python3 - "$TMP" <<'PY' || fail "writing the .pt files failed"
import os, sys, torch
t = sys.argv[1]
sd = {"fc.weight": torch.randn(4, 3), "fc.bias": torch.randn(4)}
torch.save(sd, t + "/sd.pt")
torch.save({k: v.bfloat16() for k, v in sd.items()}, t + "/bf16.pt")
torch.save(dict(sd, **{"fc.bias": torch.tensor([0.0, float("inf"), 1.0, float("nan")])}), t + "/nan.pt")
class Evil:
    def __reduce__(self):
        return (os.system, ("touch %s/RAN" % t,))
torch.save({"fc.weight": Evil()}, t + "/evil.pt")
PY
T2H=data_tools/torch_to_hetrain.py
/usr/bin/python3 $T2H "$TMP/evil.pt" -o "$TMP/evil.h5" >/dev/null 2>"$TMP/err"
one_line_error "crafted .pt" $? "$TMP/err" "give --trust-file if you trust the file"
[ -e "$TMP/RAN" ] && fail "reading the crafted .pt ran its command"
[ -e "$TMP/evil.h5" ] && fail "crafted .pt: an output was written"
/usr/bin/python3 $T2H "$TMP/evil.pt" -o "$TMP/evil.h5" --trust-file >/dev/null 2>&1
[ -e "$TMP/RAN" ] || fail "--trust-file did not use the full unpickler"
/usr/bin/python3 $T2H "$TMP/nan.pt" -o "$TMP/nan.h5" >/dev/null 2>"$TMP/err"
one_line_error "NaN/Inf tensor" $? "$TMP/err" "nan.pt: tensor fc.bias holds 2 NaN/Inf values of 4"
[ -e "$TMP/nan.h5" ] && fail "NaN/Inf tensor: an output was written"
/usr/bin/python3 $T2H "$TMP/bf16.pt" -o "$TMP/bf16.h5" >/dev/null 2>"$TMP/err" || { cat "$TMP/err"; fail "bfloat16 did not convert"; }
/usr/bin/python3 - "$TMP" <<'PY' || fail "the bfloat16 conversion differs"
import sys, h5py, numpy as np, torch
t = sys.argv[1]
ref = torch.load(t + "/bf16.pt", weights_only=True)
with h5py.File(t + "/bf16.h5", "r") as f:
    for k, v in ref.items():
        a = f["parameters"][k][()]
        assert a.dtype == np.float32 and np.array_equal(a, v.float().numpy()), k
PY

# 5. Full disks: a 2 MB tmpfs.
mkdir -p "$TMP/full"
mount -t tmpfs -o size=2m tmpfs "$TMP/full" 2>/dev/null || skip "cannot mount a tmpfs (needs root and mount rights)"
at_exit 'umount "$TMP/full"'
# expect_full NAME OUTPUT CMD...: one line, non-zero exit, nothing left in the tmpfs but the filler.
expect_full() {
  local what=$1 output=$2; shift 2
  timeout 120 "$@" >/dev/null 2>"$TMP/err"
  one_line_error "$what" $? "$TMP/err" "No space left on device"
  [ -e "$output" ] && fail "$what: $output was left"
  [ -z "$(ls "$TMP/full" | grep -v '^fill$')" ] || { ls -la "$TMP/full"; fail "$what: a partial file was left"; }
}
# hetrain-pack: failing while writing the JPEG bytes (empty disk) and while flushing (disk nearly full).
rm -f "$TMP/full"/*
expect_full "hetrain-pack (writing)" "$TMP/full/out.h5" \
  $PACK folder "$TMP/photos" --size 224 --store jpeg --stored-size 375 -o "$TMP/full/out.h5" --no-progress
for kb in 1400 1900 2040; do
  rm -f "$TMP/full"/*
  head -c $((kb * 1024)) /dev/zero >"$TMP/full/fill" 2>/dev/null
  expect_full "hetrain-pack ($kb KB used)" "$TMP/full/out.h5" \
    $PACK folder "$TMP/photos" --size 64 --store jpeg -o "$TMP/full/out.h5" --no-progress
done
rm -f "$TMP/full"/*
head -c $((1900 * 1024)) /dev/zero >"$TMP/full/fill"
/usr/bin/python3 -c "import sys, torch; torch.save({'fc.weight': torch.randn(256, 1024)}, sys.argv[1])" "$TMP/big.pt"
expect_full "torch_to_hetrain.py" "$TMP/full/w.h5" /usr/bin/python3 $T2H "$TMP/big.pt" -o "$TMP/full/w.h5"
"$HETRAIN" train --model mlp --synthetic 64 --synthetic-shape 3,32,32 --global-batch 16 --max-steps 1 --device cpu \
  --quiet --checkpoint-dir "$TMP/ck" >/dev/null || fail "training the checkpoint failed"
CK=$(ls "$TMP"/ck/checkpoint-*.h5 | tail -1)
expect_full "hetrain_to_torch.py" "$TMP/full/m.pt" /usr/bin/python3 data_tools/hetrain_to_torch.py "$CK" -o "$TMP/full/m.pt"
pass "hostile images refused before decoding, PNG by its bytes, FIFO/NUL refused, weights_only, NaN refused, full disks one line"
