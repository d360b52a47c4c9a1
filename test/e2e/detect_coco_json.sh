#!/usr/bin/env bash
# COCO-format predictions (docs/detection.md, "COCO-format predictions"): hetrain-pack coco records each
# image's id and size before letterboxing and the categories' ids; `hetrain eval --save-json` of a yolov5n
# trained briefly on those images writes COCO results whose ids are the annotation file's and whose boxes
# lie inside each original image, the same file on 1 and 3 ranks; the packed boxes mapped back with the
# recorded sizes are the annotations; a classifier and an unwritable path are refused in one line.
source "$(dirname "$0")/lib.sh"
[ -x "$PACK" ] || skip "$PACK not built"
need_python numpy h5py
W="$TMP/coco"
mkdir -p "$W/img"
/usr/bin/python3 - "$W" <<'PY' || fail "writing the COCO test set"
import json, random, struct, sys, zlib
d = sys.argv[1]
def png(path, w, h, seed):  # grey noise with one bright rectangle, the annotated object
    r = random.Random(seed)
    rows = []
    for y in range(h):
        row = bytes(200 if w // 4 <= x < w // 2 and h // 4 <= y < h // 2 else 30 + r.randrange(20) for x in range(w))
        rows.append(b"\0" + bytes(v for v in row for _ in range(3)))
    chunk = lambda t, x: struct.pack(">I", len(x)) + t + x + struct.pack(">I", zlib.crc32(t + x) & 0xffffffff)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
sizes = {21: (64, 32), 7: (40, 40), 13: (30, 60), 2: (96, 48)}
images, anns = [], []
for k, (i, (w, h)) in enumerate(sizes.items()):
    png(f"{d}/img/{i}.png", w, h, i)
    images.append({"id": i, "file_name": f"{i}.png", "width": w, "height": h})
    anns.append({"id": k + 1, "image_id": i, "category_id": 5 if k % 2 else 1, "bbox": [w // 4, h // 4, w // 4, h // 4],
                 "iscrowd": 0})
json.dump({"images": images, "annotations": anns, "categories": [{"id": 5, "name": "a"}, {"id": 1, "name": "b"}]},
          open(f"{d}/instances.json", "w"))
PY
$PACK coco --images "$W/img" --annotations "$W/instances.json" --size 64 --no-progress -o "$W/c.h5" >/dev/null \
  || fail "hetrain-pack coco failed"
# The recorded origins: ids in increasing order, sizes, category ids; the packed boxes mapped back with them.
/usr/bin/python3 - "$W/c.h5" "$W/instances.json" <<'PY' || fail "the packed origins do not give the annotations back"
import json, sys, h5py, numpy as np
f, coco = h5py.File(sys.argv[1], "r"), json.load(open(sys.argv[2]))
ids, sizes = f["image_ids"][()], f["source_sizes"][()]
assert list(ids) == [2, 7, 13, 21] and list(f.attrs["category_ids"]) == [1, 5], (ids, f.attrs["category_ids"])
by_id = {a["image_id"]: a for a in coco["annotations"]}
for k, (i, (w, h)) in enumerate(zip(ids, sizes)):
    cls, cx, cy, bw, bh = f["boxes"][f["box_offsets"][k]]
    r = 64 / max(w, h); nw, nh = round(w * r), round(h * r); sx, sy = nw / w, nh / h
    px, py = (64 - nw) // 2, (64 - nh) // 2
    box = [(cx - bw / 2) * 64, (cy - bh / 2) * 64, bw * 64, bh * 64]
    back = [(box[0] - px) / sx, (box[1] - py) / sy, box[2] / sx, box[3] / sy]
    want = by_id[int(i)]["bbox"]
    print(int(i), [round(v, 3) for v in back], want)
    assert np.allclose(back, want, atol=1e-3), (back, want)
    assert f.attrs["category_ids"][int(cls)] == by_id[int(i)]["category_id"]
PY
run_mpi 1 --model models/yolov5n.yaml --data "$W/c.h5" --global-batch 4 --epochs 40 --lr 0.002 --momentum 0.937 \
  --device cpu --checkpoint-dir "$W/ck" --quiet || fail "training on the COCO set failed"
ck="$W/ck/checkpoint-00000040.h5"
for n in 1 3; do
  timeout 120 mpirun -n $n "$HETRAIN" eval --checkpoint "$ck" --data "$W/c.h5" --device cpu --batch 1 \
    --save-json "$W/det-$n.json" >"$W/eval-$n.out" 2>&1 || { cat "$W/eval-$n.out"; fail "eval --save-json on $n rank(s) failed"; }
done
grep -q "^detections: [0-9]* written to .*det-1.json as COCO results (boxes in the original images' pixels)" \
  "$W/eval-1.out" || { cat "$W/eval-1.out"; fail "no detections line"; }
cmp "$W/det-1.json" "$W/det-3.json" || fail "--save-json differs between 1 and 3 ranks"
/usr/bin/python3 - "$W/det-1.json" "$W/instances.json" <<'PY' || fail "the COCO results are not valid for the annotations"
import json, sys
dets, coco = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
size = {im["id"]: (im["width"], im["height"]) for im in coco["images"]}
cats = {c["id"] for c in coco["categories"]}
assert dets, "no detections at all"
per_image = {}
for d in dets:
    assert set(d) == {"image_id", "category_id", "bbox", "score"}, d
    w, h = size[d["image_id"]]
    x, y, bw, bh = d["bbox"]
    assert d["category_id"] in cats and 0 < d["score"] <= 1, d
    assert -0.01 <= x and -0.01 <= y and bw >= 0 and bh >= 0 and x + bw <= w + 0.01 and y + bh <= h + 0.01, (d, w, h)
    per_image[d["image_id"]] = per_image.get(d["image_id"], 0) + 1
assert max(per_image.values()) <= 300, per_image
print(len(dets), "detections on images", sorted(per_image))
PY
timeout 60 mpirun -n 1 "$HETRAIN" eval --checkpoint "$ck" --data "$W/c.h5" --device cpu --save-json "$W/none/x.json" \
  >"$W/o" 2>"$W/e" && fail "an unwritable --save-json was accepted"
[ "$(grep -c 'hetrain: error:' "$W/e")" -eq 1 ] && grep -q -- "--save-json" "$W/e" || { cat "$W/e"; fail "not one line naming --save-json"; }
run_mpi 1 --model lenet --synthetic 32 --synthetic-shape 1,16,16 --global-batch 8 --max-steps 1 --checkpoint-dir "$W/cls" \
  --quiet || fail "the classifier run failed"
timeout 60 mpirun -n 1 "$HETRAIN" eval --checkpoint "$W/cls/checkpoint-00000001.h5" --synthetic 8 --save-json "$W/x.json" \
  >"$W/o" 2>"$W/e" && fail "--save-json of a classifier was accepted"
grep -q "hetrain: error: --save-json writes a detector's detections" "$W/e" || { cat "$W/e"; fail "the classifier's refusal"; }
pass "hetrain-pack coco records ids, sizes and category ids; eval --save-json writes COCO results in the original images' pixels, the same on 1 and 3 ranks"
