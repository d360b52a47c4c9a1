#!/usr/bin/env bash
# Detection data end to end (docs/detection.md): hetrain-pack detect-synthetic from Debian's Fashion-MNIST,
# checked with h5py (box counts and bounds, same seed → identical contents, train ≠ test, a 2-rank sharded
# pack equal to the serial one); hetrain's reader on 2 ranks hands out every image once per epoch with its
# boxes (test_data_mpi's DetectEpoch test on this file, compared with h5py); hetrain-pack coco on a COCO file
# and images written here; bad input → one error line naming the file and the entry.
source "$(dirname "$0")/lib.sh"
[ -x "$PACK" ] || skip "$PACK not built"
[ -x build/bin/test_data_mpi ] || skip "build/bin/test_data_mpi not built"
F=/usr/share/datasets/fashion-mnist
[ -f $F/train-images-idx3-ubyte.gz ] && [ -f $F/t10k-images-idx3-ubyte.gz ] \
  || skip "dataset-fashion-mnist is not installed (make deps)"
need_python h5py numpy
W=$TMP

# expect_error NEEDLE CMD...: exit 1 and exactly one stderr line "hetrain-pack: error: ...NEEDLE..."
expect_error() {
  local needle=$1; shift
  "$@" >"$W/stdout" 2>"$W/stderr"; local rc=$?
  [ $rc -eq 1 ] || { cat "$W/stderr"; fail "exit $rc (want 1): $*"; }
  [ "$(wc -l <"$W/stderr")" -eq 1 ] || { cat "$W/stderr"; fail "stderr is not one line: $*"; }
  grep -q "^hetrain-pack: error: .*$needle" "$W/stderr" || { cat "$W/stderr"; fail "no '$needle' in the error: $*"; }
  echo "ok: $(cat "$W/stderr")"
}

# 1. Generate: train twice with one seed, test once, and train again by 2 ranks into 3 shards.
GEN=(detect-synthetic --count 48 --size 96 --max-items 4 --seed 3 --no-progress)
start=$(date +%s.%N)
$PACK "${GEN[@]}" --split train -o "$W/a.h5" >"$W/a.out" || fail "detect-synthetic train"
end=$(date +%s.%N)
$PACK "${GEN[@]}" --split train -o "$W/b.h5" >/dev/null || fail "detect-synthetic train again"
$PACK "${GEN[@]}" --split test -o "$W/t.h5" >/dev/null || fail "detect-synthetic test"
timeout 120 mpirun -n 2 $PACK "${GEN[@]}" --split train --shards 3 -o "$W/s.h5" >/dev/null || fail "detect-synthetic under mpirun"
grep -q "48 samples, [0-9]* boxes" "$W/a.out" || { cat "$W/a.out"; fail "the pack's summary does not count boxes"; }
$PACK inspect "$W/s.h5" --verify --task detection >"$W/inspect" || { cat "$W/inspect"; fail "inspect --verify"; }
grep -q "boxes valid" "$W/inspect" && grep -q "task         detection" "$W/inspect" || { cat "$W/inspect"; fail "inspect"; }
echo "ok: 48 images of 96x96 generated in $(awk "BEGIN { printf \"%.2f\", $end - $start }") s ($(sed 's/.*samples, //' "$W/a.out"))"

/usr/bin/python3 - "$W" <<'PY' || fail "h5py checks"
import sys, h5py, numpy as np
d = sys.argv[1]
def load(name):
    with h5py.File(f"{d}/{name}", "r") as f:
        if f.attrs["layout"] == "index":
            parts = [load(s.decode() if isinstance(s, bytes) else s) for s in f["shards/files"][:]]
            return dict(attrs=dict(f.attrs), images=np.concatenate([p["images"] for p in parts]),
                        boxes=np.concatenate([p["boxes"] for p in parts]),
                        counts=np.concatenate([np.diff(p["offsets"]) for p in parts]))
        off = f["box_offsets"][:]
        assert f["boxes"].dtype == np.float32 and f["boxes"].shape[1] == 5, f["boxes"]
        assert off.dtype == np.int64 and off[0] == 0 and off[-1] == f["boxes"].shape[0] == f.attrs["num_boxes"]
        return dict(attrs=dict(f.attrs), images=f["images"][:], boxes=f["boxes"][:], offsets=off,
                    counts=np.diff(off))
a, b, t, s = load("a.h5"), load("b.h5"), load("t.h5"), load("s.h5")
for name, x in (("a", a), ("t", t), ("s", s)):
    assert x["attrs"]["task"] in ("detection", b"detection"), (name, x["attrs"]["task"])
    assert x["images"].shape == (48, 1, 96, 96), x["images"].shape
    bx, n = x["boxes"], x["counts"]
    assert x["attrs"]["num_boxes"] == len(bx) == n.sum(), name
    assert n.min() >= 1 and n.max() <= 4, (name, n.min(), n.max())
    assert np.all(bx[:, 0] == np.floor(bx[:, 0])) and bx[:, 0].min() >= 0 and bx[:, 0].max() <= 9, name
    assert np.all(bx[:, 3:] > 0), name
    lo, hi = bx[:, 1:3] - bx[:, 3:] / 2, bx[:, 1:3] + bx[:, 3:] / 2
    assert lo.min() >= -1e-5 and hi.max() <= 1 + 1e-5, (name, lo.min(), hi.max())
names = [c.decode() if isinstance(c, bytes) else c for c in a["attrs"]["class_names"]]
assert names[0] == "T-shirt/top" and names[9] == "Ankle boot", names
assert np.array_equal(a["images"], b["images"]) and np.array_equal(a["boxes"], b["boxes"]), "same seed differs"
assert np.array_equal(a["images"], s["images"]) and np.array_equal(a["boxes"], s["boxes"]), "sharded pack differs"
assert not np.array_equal(a["images"], t["images"]), "train and test images are equal"
print("ok: h5py: %d, %d boxes (train, test), 1-4 per image, inside [0, 1]; same seed identical; 2-rank shards equal"
      % (len(a["boxes"]), len(t["boxes"])))
PY
cmp <(h5dump -d /images -d /boxes "$W/a.h5" | tail -n +3) <(h5dump -d /images -d /boxes "$W/b.h5" | tail -n +3) \
  >/dev/null || fail "same seed: h5dump of /images and /boxes differs"

# 2. hetrain's reader on 2 ranks: each image once per epoch, with its boxes, as stored and as augmented.
HETRAIN_DETECT_DATA="$W/s.h5" HETRAIN_DETECT_DUMP="$W/dump" timeout 120 mpirun -n 2 build/bin/test_data_mpi \
  --gtest_filter='DetectEpoch.*' >"$W/mpi.out" 2>&1
grep -q "MPI-SUMMARY expected=1 passed=1 failed=0" "$W/mpi.out" || { cat "$W/mpi.out"; fail "reading on 2 ranks"; }
/usr/bin/python3 - "$W" <<'PY' || fail "the boxes read on 2 ranks differ from h5py's"
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(f"{d}/a.h5", "r") as f:  # the same contents as s.h5 (checked above)
    off, boxes = f["box_offsets"][:], f["boxes"][:]
seen = {}
for r in (0, 1):
    lines = open(f"{d}/dump.rank{r}").read().split("\n")
    assert len(lines) > 1, f"rank {r} read nothing"
    for line in filter(None, lines):
        v = line.split()
        i, n = int(v[0]), int(v[1])
        assert i not in seen, f"image {i} read twice"
        seen[i] = r
        got = np.array([float(x) for x in v[2:]], dtype=np.float32).reshape(n, 5)
        assert np.array_equal(got, boxes[off[i]:off[i + 1]]), (i, got, boxes[off[i]:off[i + 1]])
assert sorted(seen) == list(range(48)), sorted(seen)
print("ok: 2 ranks read %d and %d images, each once, each with its boxes" %
      (list(seen.values()).count(0), list(seen.values()).count(1)))
PY

# 3. COCO: 2 PNG images and an instances file written here.
mkdir -p "$W/coco/img"
/usr/bin/python3 - "$W/coco" <<'PY' || fail "writing the COCO test set"
import json, struct, sys, zlib
d = sys.argv[1]
def png(path, w, h, value):
    raw = b"".join(b"\0" + bytes([value]) * (3 * w) for _ in range(h))
    chunk = lambda t, x: struct.pack(">I", len(x)) + t + x + struct.pack(">I", zlib.crc32(t + x) & 0xffffffff)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
png(f"{d}/img/x.png", 64, 32, 50)
png(f"{d}/img/y.png", 40, 40, 90)
coco = {"images": [{"id": 11, "file_name": "x.png", "width": 64, "height": 32},
                   {"id": 4, "file_name": "y.png", "width": 40, "height": 40}],
        "categories": [{"id": 5, "name": "cat"}, {"id": 1, "name": "person"}],
        "annotations": [{"id": 1, "image_id": 11, "category_id": 5, "bbox": [0, 0, 32, 16], "iscrowd": 0},
                        {"id": 2, "image_id": 4, "category_id": 1, "bbox": [10, 10, 20, 10], "iscrowd": 0},
                        {"id": 3, "image_id": 4, "category_id": 5, "bbox": [0, 0, 40, 40], "iscrowd": 1}]}
json.dump(coco, open(f"{d}/instances.json", "w"))
bad = dict(coco, annotations=coco["annotations"] + [{"id": 77, "image_id": 4, "category_id": 9, "bbox": [1, 1, 2, 2]}])
json.dump(bad, open(f"{d}/bad.json", "w"))
# file_names that leave the images folder; a copy of y.png sits just above it, so a name that escapes
# would pack without an error.
open(f"{d}/outside.png", "wb").write(open(f"{d}/img/y.png", "rb").read())
for tag, name in (("up", "../outside.png"), ("absolute", f"{d}/outside.png"), ("hidden", "sub/../../outside.png")):
    json.dump(dict(coco, images=[coco["images"][0], dict(coco["images"][1], file_name=name)]),
              open(f"{d}/{tag}.json", "w"))
PY
$PACK coco --images "$W/coco/img" --annotations "$W/coco/instances.json" --size 32 -o "$W/coco.h5" --no-progress \
  >"$W/coco.out" || fail "coco pack"
grep -q "2 samples, 2 boxes" "$W/coco.out" || { cat "$W/coco.out"; fail "coco summary"; }
/usr/bin/python3 - "$W/coco.h5" <<'PY' || fail "coco contents"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    names = [c.decode() if isinstance(c, bytes) else c for c in f.attrs["class_names"]]
    assert names == ["person", "cat"], names
    assert list(f["box_offsets"][:]) == [0, 1, 2]
    # y.png (id 4) first: 40 -> 32 (x 0.8): person x 8..24, y 8..16. x.png: 64x32 -> 32x16, 8 px above:
    # cat x 0..16, y 8..16.
    want = np.array([[0, 0.5, 0.375, 0.5, 0.25], [1, 0.25, 0.375, 0.5, 0.25]], dtype=np.float32)
    assert np.allclose(f["boxes"][:], want, atol=1e-6), f["boxes"][:]
    assert f["images"][1, 0, 0, 0] == 114 and f["images"][1, 0, 16, 16] == 50
print("ok: coco: classes mapped to [person, cat], crowd skipped, boxes letterboxed")
PY

# 4. Bad input: one line naming the file and the entry.
cp "$W/a.h5" "$W/outside.h5"; cp "$W/a.h5" "$W/zero.h5"; cp "$W/a.h5" "$W/class.h5"; cp "$W/a.h5" "$W/offsets.h5"
/usr/bin/python3 - "$W" <<'PY' || fail "editing files"
import sys, h5py
d = sys.argv[1]
with h5py.File(f"{d}/outside.h5", "r+") as f: f["boxes"][3, 1] = 1.2
with h5py.File(f"{d}/zero.h5", "r+") as f: f["boxes"][0, 4] = 0
with h5py.File(f"{d}/class.h5", "r+") as f: f["boxes"][1, 0] = 10
with h5py.File(f"{d}/offsets.h5", "r+") as f: f["box_offsets"][-1] -= 1
PY
expect_error "outside.h5: box 3 (sample .*) lies outside \[0, 1\]" $PACK inspect "$W/outside.h5"
expect_error "zero.h5: box 0 (sample 0) has zero size" $PACK inspect "$W/zero.h5"
expect_error "class.h5: box 1 (sample .*) class 10 is not an integer in \[0, 10)" $PACK inspect "$W/class.h5"
expect_error "offsets.h5: /box_offsets do not add up" $PACK inspect "$W/offsets.h5"
$PACK synthetic --count 10 --size 4 -o "$W/cls.h5" --no-progress >/dev/null || fail "classification pack"
expect_error "cls.h5: a classification dataset (no /boxes), but --task detection needs a detection dataset" \
  $PACK inspect "$W/cls.h5" --task detection
expect_error "a.h5: a detection dataset (with /boxes), but --task classification needs a classification dataset" \
  $PACK inspect "$W/a.h5" --task classification
expect_error "bad.json: annotations\[3\] (id 77): category_id 9 is not among the categories" \
  $PACK coco --images "$W/coco/img" --annotations "$W/coco/bad.json" --size 32 -o "$W/bad.h5"
for tag in up absolute hidden; do
  expect_error "$tag.json: images\[1\] (id 4): file_name '.*outside.png' leaves the --images folder" \
    $PACK coco --images "$W/coco/img" --annotations "$W/coco/$tag.json" --size 32 -o "$W/esc.h5"
done
expect_error "--split must be train or test" $PACK detect-synthetic --split val --count 2 -o "$W/x.h5"
expect_error "nothere/train-images-idx3-ubyte.gz: cannot open" \
  $PACK detect-synthetic --fashion-mnist "$W/nothere" --count 2 -o "$W/x.h5"
[ -e "$W/bad.h5" ] || [ -e "$W/x.h5" ] && fail "a failed pack left its output"
pass "detect-synthetic and coco packs checked with h5py; 2 ranks read each image once with its boxes; bad input named"
