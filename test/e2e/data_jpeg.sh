#!/usr/bin/env bash
# JPEG storage and the ImageNet recipe (docs/dataset-format.md "JPEG storage", docs/augmentation.md) on
# photo-like JPEG files (bench/photo_folder.py): `hetrain-pack folder --store jpeg` serially and under mpirun
# into shards stores the same bytes, at most 1/4 of raw pixels at 224; `inspect --verify` decodes every
# image; --augment rrc trains the same weights on 1 rank and on 4 ranks with split (5, 0, 17, 10), from JPEG
# and from raw storage, with 1 or 2 decode threads, and differs from --augment (crop); a damaged image is
# one error line naming the file and sample, from inspect and from 2 training ranks, with no hang.
source "$(dirname "$0")/lib.sh"
need_python h5py numpy PIL
/usr/bin/python3 bench/photo_folder.py "$TMP/photos" --classes 4 --per-class 16 || fail "writing the photos failed"

# Packing: serial and 2 ranks into 3 shards store the same JPEG bytes; storage at 224 is ≤ 1/4 of raw.
$PACK folder "$TMP/photos" --size 224 --store jpeg -o "$TMP/j224.h5" --no-progress >/dev/null || fail "jpeg pack"
$PACK folder "$TMP/photos" --size 224 -o "$TMP/r224.h5" --no-progress >/dev/null || fail "raw pack"
mkdir -p "$TMP/set" && timeout 300 mpirun -n 2 $PACK folder "$TMP/photos" --size 224 --store jpeg --shards 3 -o "$TMP/set/j224.h5" \
  --no-progress >/dev/null || fail "jpeg pack under mpirun"
/usr/bin/python3 - "$TMP" <<'PY' || fail "the shards and the single file differ, or JPEG is not <= 1/4 of raw"
import glob, os, sys, h5py, numpy as np
t = sys.argv[1]
with h5py.File(t + "/j224.h5", "r") as f:
    assert f.attrs["storage"] == "jpeg", f.attrs["storage"]
    one = f["jpeg"][:]
    offsets = f["jpeg_offsets"][:]
    labels = f["labels"][:]
parts, part_labels = [], []
for p in sorted(glob.glob(t + "/set/j224-*.h5")):
    with h5py.File(p, "r") as f:
        parts.append(f["jpeg"][:])
        part_labels.append(f["labels"][:])
assert len(parts) == 3
assert np.array_equal(np.concatenate(parts), one), "shard bytes differ from the single file's"
assert np.array_equal(np.concatenate(part_labels), labels)
jpeg, raw = os.path.getsize(t + "/j224.h5"), os.path.getsize(t + "/r224.h5")
print(f"JPEG file {jpeg} bytes, raw {raw} bytes: 1/{raw / jpeg:.1f}; {offsets[-1] / len(labels):.0f} bytes per image")
assert jpeg * 4 <= raw
PY
$PACK inspect "$TMP/j224.h5" --verify >"$TMP/inspect" || { cat "$TMP/inspect"; fail "inspect --verify of the JPEG file"; }
grep -q "verify       OK: .* 64 images decoded, mean/std match" "$TMP/inspect" || { cat "$TMP/inspect"; fail "verify line"; }
grep -q "storage      JPEG, .* KB per image" "$TMP/inspect" || { cat "$TMP/inspect"; fail "inspect's storage line"; }

# Equivalence: a sample's window and flip follow (seed, epoch, dataset index) only. 2 epochs (new windows).
$PACK folder "$TMP/photos" --size 32 --store jpeg -o "$TMP/j32.h5" --no-progress >/dev/null || fail "jpeg pack 32"
$PACK folder "$TMP/photos" --size 32 -o "$TMP/r32.h5" --no-progress >/dev/null || fail "raw pack 32"
RUN=(--model mlp --global-batch 32 --epochs 2 --lr 0.05 --momentum 0.9 --quiet)
for data in j32 r32; do
  run_mpi 1 "${RUN[@]}" --data "$TMP/$data.h5" --augment rrc --dump-params "$TMP/$data-one.bin" || fail "$data: 1 rank"
  run_mpi 4 "${RUN[@]}" --data "$TMP/$data.h5" --augment rrc --split 5,0,17,10 --dump-params "$TMP/$data-four.bin" \
    || fail "$data: 4 ranks"
  float_compare "$TMP/$data-one.bin" "$TMP/$data-four.bin" 1e-5 \
    || fail "$data with --augment rrc: 4 ranks with split 5,0,17,10 differ from 1 rank"
done
run_mpi 2 "${RUN[@]}" --data "$TMP/j32.h5" --augment rrc --decode-threads 2 --dump-params "$TMP/j32-threads.bin" \
  || fail "2 decode threads"
float_compare "$TMP/j32-one.bin" "$TMP/j32-threads.bin" 1e-5 || fail "2 decode threads changed the weights"
run_mpi 1 "${RUN[@]}" --data "$TMP/j32.h5" --augment --dump-params "$TMP/j32-crop.bin" || fail "--augment crop run"
float_compare "$TMP/j32-one.bin" "$TMP/j32-crop.bin" 1e-5 && fail "--augment rrc trained what --augment does"

# Options: one error line each.
expect_option_error() {
  local needle=$1; shift
  run_mpi 1 "$@" --model mlp --global-batch 16 --max-steps 1 --quiet >/dev/null 2>"$TMP/err"
  local rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$*: exit $rc"
  grep -q "^hetrain: error: .*$needle" "$TMP/err" || { cat "$TMP/err"; fail "no '$needle' for: $*"; }
  [ "$(grep -c '^hetrain: error:' "$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "not one error line: $*"; }
  echo "ok: $(grep '^hetrain: error:' "$TMP/err")"
}
expect_option_error "--augment takes crop .* or rrc .*, got 'rcc'" --data "$TMP/j32.h5" --augment rcc
expect_option_error "--decode-threads must not be negative" --data "$TMP/j32.h5" --decode-threads -1
expect_option_error "j32.h5: --cache holds raw pixels, and this dataset stores JPEG" --data "$TMP/j32.h5" --cache
mkdir -p "$TMP/out"
$PACK folder "$TMP/photos" --size 32 --quality 80 -o "$TMP/out/x.h5" >/dev/null 2>"$TMP/err" && fail "--quality without --store jpeg"
grep -q "^hetrain-pack: error: --quality applies to --store jpeg only" "$TMP/err" || { cat "$TMP/err"; fail "--quality error"; }
[ -z "$(ls -A "$TMP/out")" ] || fail "a refused pack left files"

# A damaged image: sample 9's bytes overwritten in the middle.
cp "$TMP/j32.h5" "$TMP/bad.h5"
/usr/bin/python3 - "$TMP/bad.h5" <<'PY' || fail "damaging the file failed"
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    o = f["jpeg_offsets"]
    a, b = int(o[9]), int(o[10])
    f["jpeg"][a + 20:b] = 0x5A
PY
$PACK inspect "$TMP/bad.h5" --verify >/dev/null 2>"$TMP/err" && fail "inspect --verify passed a damaged image"
[ "$(wc -l <"$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "inspect: not one line"; }
grep -q "^hetrain-pack: error: .*bad.h5: sample 9: corrupt" "$TMP/err" || { cat "$TMP/err"; fail "inspect's error"; }
run_mpi 2 --data "$TMP/bad.h5" --model mlp --global-batch 16 --epochs 1 --quiet >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "training on a damaged image: exit $rc"
[ "$(grep -c '^hetrain: error:' "$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "training: not one error line"; }
grep -q "^hetrain: error: .*bad.h5: sample 9: corrupt" "$TMP/err" || { cat "$TMP/err"; fail "training's error"; }
pass "JPEG packs alike serially and in shards (<= 1/4 of raw at 224), verifies, trains split-invariantly with --augment rrc; damage is named"
