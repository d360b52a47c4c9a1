#!/usr/bin/env bash
# hetrain-pack end to end: help, packing, inspect --verify, files readable by h5dump and h5py, a parallel
# folder pack under mpirun equal to the serial one, and bad input → one error line, exit 1, no output left.
set -uo pipefail
cd "$(dirname "$0")/../.."
PACK=$PWD/build/bin/hetrain-pack
[ -x "$PACK" ] || { echo "SKIP: $PACK not built"; exit 77; }
W=$(mktemp -d /tmp/hetrain-e2e-data.XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader

# expect_error NEEDLE CMD... : exit 1, exactly one stderr line "hetrain-pack: error: ...NEEDLE...", no new files
expect_error() {
  local needle=$1; shift
  local before after
  before=$(ls -A "$W/out" | sort)
  "$@" >"$W/stdout" 2>"$W/stderr"; local rc=$?
  after=$(ls -A "$W/out" | sort)
  [ $rc -eq 1 ] || fail "exit $rc (want 1): $*"
  [ "$(wc -l <"$W/stderr")" -eq 1 ] || { cat "$W/stderr"; fail "stderr is not one line: $*"; }
  grep -q "^hetrain-pack: error: .*$needle" "$W/stderr" || { cat "$W/stderr"; fail "no '$needle' in the error: $*"; }
  [ "$before" = "$after" ] || fail "files left behind: $(comm -13 <(echo "$before") <(echo "$after"))"
  echo "ok: $(cat "$W/stderr")"
}
mkdir -p "$W/out"

$PACK --help | grep -q "synthetic" || fail "--help"
for c in idx cifar folder synthetic inspect; do $PACK $c --help | grep -q -- "--" || fail "$c --help"; done

# synthetic, sharded, with a validation split; inspect --verify; h5dump and h5py read it.
$PACK synthetic --count 500 --size 8 --classes 5 --shards 4 --val-fraction 0.2 --val-output "$W/out/val.h5" \
  -o "$W/out/train.h5" --no-progress >/dev/null || fail "synthetic pack"
$PACK inspect "$W/out/train.h5" --verify | grep -q "verify       OK" || fail "inspect --verify"
$PACK inspect "$W/out/val.h5" | grep -q "samples      100" || fail "val count"
h5dump -a /format "$W/out/train-00000-of-00004.h5" | grep -q '"hetrain-dataset"' || fail "h5dump"
/usr/bin/python3 - "$W/out" <<'PY' || fail "h5py"
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/train.h5", "r") as idx:
    files = [f.decode() if isinstance(f, bytes) else f for f in idx["shards/files"][:]]
    assert idx.attrs["num_samples"] == 400, idx.attrs["num_samples"]
    n = 0
    for f in files:
        with h5py.File(d + "/" + f, "r") as s:
            assert s["images"].dtype == np.uint8 and s["images"].shape[1:] == (3, 8, 8)
            assert s["labels"][:].max() < 5
            n += s["images"].shape[0]
    assert n == 400
PY

# folder: PNG + JPEG, packed serially and by 2 ranks into 3 shards: same bytes.
/usr/bin/python3 - "$W/img" <<'PY' || fail "writing test images"
import sys, os, zlib, struct
root = sys.argv[1]
def png(path, w, h, seed):
    raw = b"".join(b"\0" + bytes(((x * 7 + y * 3 + seed * 11 + c * 50) % 256) for x in range(w) for c in range(3)) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for k, cls in enumerate(["ant", "bee", "cow"]):
    os.makedirs(f"{root}/{cls}")
    for i in range(5):
        png(f"{root}/{cls}/{i}.png", 20 + i, 16, k * 10 + i)
PY
$PACK folder "$W/img" --size 12 --shards 3 -o "$W/out/serial.h5" --no-progress >/dev/null || fail "folder serial"
mpirun -n 2 $PACK folder "$W/img" --size 12 --shards 3 -o "$W/out/par.h5" --no-progress >/dev/null || fail "folder mpirun"
for s in 0 1 2; do
  cmp <(h5dump -d /images "$W/out/serial-0000$s-of-00003.h5" | tail -n +3) \
      <(h5dump -d /images "$W/out/par-0000$s-of-00003.h5" | tail -n +3) >/dev/null || fail "parallel shard $s differs"
done
$PACK inspect "$W/out/par.h5" --verify | grep -q "verify       OK" || fail "verify parallel"

# Bad input.
expect_error "no such file" $PACK inspect "$W/nothere.h5"
head -c 3000 /dev/urandom >"$W/junk.h5"
expect_error "not an HDF5 file" $PACK inspect "$W/junk.h5"
head -c 2000 "$W/out/serial-00000-of-00003.h5" >"$W/trunc.h5"
expect_error "truncated" $PACK inspect "$W/trunc.h5"
mv "$W/out/serial-00001-of-00003.h5" "$W/moved.h5"
expect_error "shard 1 of 3 listed in the index is missing" $PACK inspect "$W/out/serial.h5"
F=/usr/share/datasets/fashion-mnist
if [ -f $F/t10k-images-idx3-ubyte.gz ]; then
  gzip -dc $F/t10k-images-idx3-ubyte.gz | head -c 100000 >"$W/short-idx"
  expect_error "truncated IDX data" $PACK idx --images "$W/short-idx" --labels $F/t10k-labels-idx1-ubyte.gz -o "$W/out/x.h5"
  expect_error "10000 images but .* 60000 labels" $PACK idx --images $F/t10k-images-idx3-ubyte.gz \
    --labels $F/train-labels-idx1-ubyte.gz -o "$W/out/x.h5"
fi
head -c 5000 /dev/urandom >"$W/c.bin"
expect_error "c.bin: truncated CIFAR-10 batch.*record 1 at offset 3073" $PACK cifar "$W/c.bin" -o "$W/out/c.h5"
mkdir -p "$W/bad/a" && head -c 400 /dev/urandom >"$W/bad/a/x.jpg"
expect_error "x.jpg: corrupt" $PACK folder "$W/bad" --size 8 -o "$W/out/b.h5"
expect_error "empty dataset" $PACK synthetic --count 0 -o "$W/out/e.h5"
expect_error "unknown command" $PACK frobnicate
expect_error "option '--output' is required" $PACK synthetic --count 3
# Under mpirun a failing pack also leaves nothing (the failing rank aborts the job).
cp -r "$W/img" "$W/img2" && head -c 100 "$W/img/cow/4.png" >"$W/img2/cow/4.png"
mpirun -n 2 $PACK folder "$W/img2" --size 12 --shards 4 -o "$W/out/p2.h5" --no-progress >/dev/null 2>"$W/stderr" \
  && fail "mpirun pack of a truncated PNG succeeded"
grep -q "4.png" "$W/stderr" || { cat "$W/stderr"; fail "mpirun error does not name the file"; }
ls "$W/out" | grep -q "p2" && fail "mpirun failure left files: $(ls "$W/out" | grep p2)"
echo "PASS"
