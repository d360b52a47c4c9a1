#!/usr/bin/env bash
# Damaged or hand-made dataset files (crafted with h5py) under `mpirun -n 4 hetrain train` and `hetrain-pack
# inspect`: each is refused with exactly one error line naming the file and the problem (not one per rank,
# not std::bad_alloc), a non-zero exit and no hang. `inspect --verify` finds what only reading every image
# shows (a stored mean that does not match the pixels) and fails; plain inspect of that file succeeds.
source "$(dirname "$0")/lib.sh"
need_python h5py numpy
$PACK synthetic --count 400 --size 8 --channels 1 --classes 4 --shards 4 -o "$TMP/set.h5" --no-progress >/dev/null \
  || fail "packing the shard set failed"
$PACK synthetic --count 200 --size 8 --channels 1 --classes 4 -o "$TMP/one.h5" --no-progress >/dev/null \
  || fail "packing the single file failed"
mkdir -p "$TMP/label" && cp "$TMP"/set*.h5 "$TMP/label/"
/usr/bin/python3 - "$TMP" <<'PY' || fail "crafting the bad files failed"
import shutil, sys, h5py, numpy as np
t = sys.argv[1]
huge = 2 ** 36
# An index whose first shard claims 2^36 samples (the shard holds 100).
shutil.copy(t + "/set.h5", t + "/huge-index.h5")
with h5py.File(t + "/huge-index.h5", "r+") as f:
    c = f["shards/counts"][:]
    c[0] = huge
    f["shards/counts"][:] = c
    f.attrs.modify("num_samples", np.int64(c.sum()))
# A single file whose /images and /labels claim 2^36 samples with nothing stored.
with h5py.File(t + "/one.h5", "r") as src, h5py.File(t + "/huge-sparse.h5", "w") as f:
    for k, v in src.attrs.items():
        f.attrs[k] = v
    f.attrs.modify("num_samples", np.int64(huge))
    f.create_dataset("images", shape=(huge, 1, 8, 8), dtype="u1", chunks=(1024, 1, 8, 8))
    f.create_dataset("labels", shape=(huge,), dtype="<i4", chunks=(16384,))
# A label outside [0, 4) inside shard 2 of a copy of the set.
with h5py.File(t + "/label/set-00002-of-00004.h5", "r+") as f:
    f["labels"][7] = 9
# Attributes that contradict each other, a wrong /images type, a shard count the index gets wrong.
shutil.copy(t + "/one.h5", t + "/names.h5")
with h5py.File(t + "/names.h5", "r+") as f:
    f.attrs["class_names"] = np.array(["a", "b"], dtype=h5py.string_dtype())
shutil.copy(t + "/one.h5", t + "/float.h5")
with h5py.File(t + "/float.h5", "r+") as f:
    del f["images"]
    f.create_dataset("images", data=np.zeros((200, 1, 8, 8), dtype="f4"))
shutil.copy(t + "/set.h5", t + "/counts.h5")
with h5py.File(t + "/counts.h5", "r+") as f:
    f["shards/counts"][:] = np.array([101, 99, 100, 100], dtype="i8")
# A 'format' attribute of 50 MiB: the error shows it clipped, not whole.
shutil.copy(t + "/one.h5", t + "/bigformat.h5")
with h5py.File(t + "/bigformat.h5", "r+") as f:
    f.attrs["format"] = "y" * (50 << 20)
# A stored mean that the pixels do not have (only --verify reads every image).
shutil.copy(t + "/one.h5", t + "/mean.h5")
with h5py.File(t + "/mean.h5", "r+") as f:
    f.attrs["mean"] = np.array([0.9], dtype="f4")
PY

# expect_train_error NEEDLE FILE: 4 ranks, one error line naming the problem, non-zero exit, no hang.
expect_train_error() {
  local needle=$1 file=$2
  run_mpi 4 --data "$file" --model mlp --global-batch 16 --max-steps 4 --quiet >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ $rc -ne 0 ] || fail "$file: training exited 0"
  [ $rc -ne 124 ] || fail "$file: training hung"
  grep -qiE 'bad_alloc|out of memory|Signal:' "$TMP/err" && { cat "$TMP/err"; fail "$file: crash or bad_alloc"; }
  [ "$(grep -c '^hetrain: error:' "$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "$file: not exactly one error line"; }
  grep -q "^hetrain: error: .*$needle" "$TMP/err" || { cat "$TMP/err"; fail "$file: no '$needle' in the error"; }
  echo "ok (train, exit $rc): $(grep '^hetrain: error:' "$TMP/err")"
}
# expect_inspect_error NEEDLE ARGS...: exit 1, exactly one stderr line "hetrain-pack: error: ...NEEDLE...".
expect_inspect_error() {
  local needle=$1; shift
  $PACK inspect "$@" >/dev/null 2>"$TMP/err"
  local rc=$?
  [ $rc -eq 1 ] || fail "inspect $*: exit $rc (want 1)"
  [ "$(wc -l <"$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "inspect $*: stderr is not one line"; }
  grep -q "^hetrain-pack: error: .*$needle" "$TMP/err" || { cat "$TMP/err"; fail "inspect $*: no '$needle'"; }
  echo "ok (inspect): $(cat "$TMP/err")"
}

# Control: the intact set trains on 4 ranks and inspects clean.
run_mpi 4 --data "$TMP/set.h5" --model mlp --global-batch 16 --max-steps 4 --quiet >/dev/null 2>"$TMP/err" \
  || { cat "$TMP/err"; fail "the intact set does not train"; }
$PACK inspect "$TMP/set.h5" --verify | grep -q "verify       OK" || fail "the intact set does not verify"

expect_train_error "huge-index.h5: the index says shard 0 .*set-00000-of-00004.h5) holds 68719476736 samples, the shard says 100" \
  "$TMP/huge-index.h5"
expect_train_error "huge-sparse.h5: claims 68719476736 samples of 64 bytes, more than its [0-9]* bytes can hold" \
  "$TMP/huge-sparse.h5"
expect_train_error "label/set-00002-of-00004.h5: label 9 of sample 7 is outside \[0, 4)" "$TMP/label/set.h5"
expect_train_error "names.h5: 2 class names for 4 classes" "$TMP/names.h5"
expect_train_error "float.h5: /images must be uint8" "$TMP/float.h5"
expect_train_error "counts.h5: the index says shard 0 .* holds 101 samples, the shard says 100" "$TMP/counts.h5"

big=$((50 << 20))
expect_train_error "bigformat.h5: format is 'y*…' ($big bytes), expected 'hetrain-dataset'" "$TMP/bigformat.h5"
[ "$(wc -c <"$TMP/err")" -lt $((big / 1000)) ] || fail "bigformat.h5: training's stderr holds $(wc -c <"$TMP/err") bytes"
expect_inspect_error "bigformat.h5: format is 'y*…' ($big bytes)" "$TMP/bigformat.h5"
[ "$(wc -c <"$TMP/err")" -lt $((big / 1000)) ] || fail "bigformat.h5: inspect's stderr holds $(wc -c <"$TMP/err") bytes"

expect_inspect_error "huge-index.h5: the index says shard 0" "$TMP/huge-index.h5"
expect_inspect_error "huge-sparse.h5: claims 68719476736 samples" "$TMP/huge-sparse.h5"
expect_inspect_error "set-00002-of-00004.h5: label 9 of sample 7" "$TMP/label/set.h5"
expect_inspect_error "float.h5: /images must be uint8" "$TMP/float.h5" --verify
# --verify is what finds a mean the pixels do not have: plain inspect passes, --verify fails.
$PACK inspect "$TMP/mean.h5" >/dev/null 2>&1 || fail "plain inspect of mean.h5 failed (only --verify should)"
expect_inspect_error "mean.h5: channel 0 mean/std recomputed as .* but stored as 0.9/" "$TMP/mean.h5" --verify
pass "bad dataset files are refused once, naming the file; inspect --verify fails on a wrong mean"
