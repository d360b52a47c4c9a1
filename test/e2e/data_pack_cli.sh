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
/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null || fail "missing python3-h5py/numpy for /usr/bin/python3: run make deps"
command -v h5dump >/dev/null || fail "missing h5dump (hdf5-tools): run make deps"
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
/usr/bin/python3 test/e2e/png_folder.py "$W/img" || fail "writing test images"
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
expect_error "x.jpg: neither a JPEG nor a PNG file" $PACK folder "$W/bad" --size 8 -o "$W/out/b.h5"
expect_error "empty dataset" $PACK synthetic --count 0 -o "$W/out/e.h5"
expect_error "unknown command" $PACK frobnicate
expect_error "option '--output' is required" $PACK synthetic --count 3
# Under mpirun a failing pack also leaves nothing (the failing rank aborts the job).
cp -r "$W/img" "$W/img2" && head -c 100 "$W/img/cow/4.png" >"$W/img2/cow/4.png"
mpirun -n 2 $PACK folder "$W/img2" --size 12 --shards 4 -o "$W/out/p2.h5" --no-progress >/dev/null 2>"$W/stderr" \
  && fail "mpirun pack of a truncated PNG succeeded"
grep -q "4.png" "$W/stderr" || { cat "$W/stderr"; fail "mpirun error does not name the file"; }
ls "$W/out" | grep -q "p2" && fail "mpirun failure left files: $(ls "$W/out" | grep p2)"

# An output that is an input, or the other output, is refused (compared by device and inode: another name
# or a hard link of the same file counts) and the input is left as it was.
mkdir -p "$W/in"
/usr/bin/python3 - "$W/in" <<'PY' || fail "writing IDX inputs"
import sys, struct, random
d = sys.argv[1]; random.seed(3)
open(d + "/img", "wb").write(struct.pack(">IIII", 0x803, 20, 4, 4) + bytes(random.randrange(256) for _ in range(320)))
open(d + "/lab", "wb").write(struct.pack(">II", 0x801, 20) + bytes(random.randrange(10) for _ in range(20)))
PY
cp "$W/in/img" "$W/img.orig" && cp "$W/in/lab" "$W/lab.orig" && ln "$W/in/lab" "$W/in/lab-link"
expect_error "-o .*in/img is the same file as the input .*in/img (--images): refusing to overwrite an input" \
  $PACK idx --images "$W/in/img" --labels "$W/in/lab" -o "$W/in/img"
expect_error "-o .*lab-link is the same file as the input .*in/lab (--labels)" \
  $PACK idx --images "$W/in/img" --labels "$W/in/lab" -o "$W/in/lab-link"
expect_error "-o .*in/../in/img is the same file as the input" \
  $PACK idx --images "$W/in/img" --labels "$W/in/lab" -o "$W/in/../in/img"
cmp -s "$W/in/img" "$W/img.orig" && cmp -s "$W/in/lab" "$W/lab.orig" || fail "an input was modified"
expect_error "--val-output .*out/v.h5 is the same file as -o .*out/v.h5: one output would overwrite the other" \
  $PACK synthetic --count 100 --size 4 --val-fraction 0.2 --val-output "$W/out/v.h5" -o "$W/out/v.h5"
expect_error "--val-output .*out/./v.h5 is the same file as -o" \
  $PACK synthetic --count 100 --size 4 --val-fraction 0.2 --val-output "$W/out/./v.h5" -o "$W/out/v.h5"
expect_error "--val-output .*v-00001-of-00002.h5 is the same file as shard 1 of -o .*v.h5" \
  $PACK synthetic --count 100 --size 4 --shards 2 --val-fraction 0.2 --val-output "$W/out/v-00001-of-00002.h5" \
  -o "$W/out/v.h5"
# Control: the same inputs into a new file work, and so do two different outputs.
$PACK idx --images "$W/in/img" --labels "$W/in/lab" -o "$W/in/ok.h5" --no-progress >/dev/null || fail "idx pack"
$PACK synthetic --count 100 --size 4 --val-fraction 0.2 --val-output "$W/in/v2.h5" -o "$W/in/t2.h5" --no-progress \
  >/dev/null || fail "pack with a validation output"

# Absurd image sizes are refused with the option named (products in 64 bits: 60000^2 overflows 32).
expect_error "--channels/--size 60000: a 3x60000x60000 sample is 1.08e+10 bytes, more than hetrain handles" \
  $PACK synthetic --count 2 --size 60000 -o "$W/out/huge.h5"
expect_error "--size 60000: a 3x60000x60000 sample is 1.08e+10 bytes" $PACK folder "$W/img" --size 60000 -o "$W/out/huge.h5"

# Counts whose bookkeeping cannot fit in memory, or whose files cannot fit on disk, are refused before any
# work. ulimit -v makes "cannot fit" exact (the limit, not the machine's memory) and keeps a regression from
# taking the machine's memory; ulimit -f stops one that writes at a megabyte instead of filling the disk.
limit_kb=2000000
huge=$((limit_kb * 1024))  # the 8-byte sample index alone is 8 times the limit
(ulimit -v $limit_kb; expect_error "packing $huge samples needs about .* of memory, but only .* is available" \
  $PACK synthetic --count $huge --size 4 -o "$W/out/m.h5") || exit 1
if [ -f $F/train-images-idx3-ubyte.gz ]; then
  (ulimit -v $limit_kb; expect_error "packing $((huge + 1)) samples needs about .* of memory" \
    $PACK detect-synthetic --count $((huge + 1)) --size 32 -o "$W/out/m.h5") || exit 1
fi
free=$(df --output=avail -B1 "$W/out" | tail -1)
sample=$((1024 * 1024))  # --channels 1 --size 1024
(ulimit -v $limit_kb -f 1024; expect_error "-o $W/out/d.h5 (.* samples) needs about .* of disk space, but $W/out has only" \
  $PACK synthetic --count $((2 * free / sample + 1)) --channels 1 --size 1024 -o "$W/out/d.h5") || exit 1
# The class patterns of the generator are bounded: 100000 channels is refused at once, not computed for a minute.
expect_error "synthetic: 10 class patterns of 100000x32x32 are .* more than the generator renders" \
  $PACK synthetic --count 2 --channels 100000 --size 32 -o "$W/out/c.h5"

# Signals: an interrupted pack removes its temporary file and ends by that signal (SIGTERM: 143, SIGINT: 130);
# so does every rank of a pack under mpirun.
mkdir -p "$W/sig"
# wait_for_temp [N]: until N (default 1) *.tmp-* files of some size exist in $W/sig (the pack is writing)
wait_for_temp() {
  for _ in $(seq 400); do
    [ "$(find "$W/sig" -name '*.tmp-*' -size +100k 2>/dev/null | wc -l)" -ge "${1:-1}" ] && return 0
    sleep 0.05
  done
  fail "no temporary file appeared in $W/sig"
}
BIG=(synthetic --count 4000000 --channels 1 --size 16 --no-progress)
$PACK "${BIG[@]}" -o "$W/sig/t.h5" >/dev/null 2>&1 &
pid=$!
wait_for_temp
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 143 ] || fail "SIGTERM: exit status $rc, want 143 (killed by SIGTERM)"
[ -z "$(ls -A "$W/sig")" ] || fail "SIGTERM left files: $(ls -A "$W/sig")"
/usr/bin/python3 - "$PACK" "$W/sig" <<'PY' || fail "SIGINT"
import glob, os, signal, subprocess, sys, time
pack, d = sys.argv[1], sys.argv[2]
p = subprocess.Popen([pack, "synthetic", "--count", "4000000", "--channels", "1", "--size", "16", "--no-progress",
                      "-o", d + "/i.h5"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
for _ in range(400):
    if any(os.path.getsize(f) > 100000 for f in glob.glob(d + "/*.tmp-*")): break
    time.sleep(0.05)
else:
    sys.exit("no temporary file appeared")
p.send_signal(signal.SIGINT)
rc = p.wait()
left = os.listdir(d)
if rc != -signal.SIGINT or left: sys.exit("SIGINT: exit %d (want -2), left %s" % (rc, left))
PY
# Both ranks get SIGTERM (as from a batch system), by the pids their temporary files are named after.
mpirun -n 2 $PACK "${BIG[@]}" --shards 2 -o "$W/sig/m.h5" >/dev/null 2>&1 &
pid=$!
wait_for_temp 2
kill -TERM $(ls "$W/sig" | sed -n 's/.*\.tmp-//p')
timeout 60 tail --pid=$pid -f /dev/null || fail "mpirun did not stop after its ranks got SIGTERM"
wait $pid && fail "mpirun exited 0 after its ranks got SIGTERM"
[ -z "$(ls -A "$W/sig")" ] || fail "SIGTERM to the ranks of mpirun left files: $(ls -A "$W/sig")"
echo "ok: SIGTERM (exit 143), SIGINT, and SIGTERM to each rank under mpirun leave no temporary files"

# Stale temporaries (SIGKILL leaves them): a pack to the same output removes those whose process is gone,
# saying so, and keeps those of a live process.
sleep 0 &
dead=$!
wait $dead
kill -0 $dead 2>/dev/null && fail "pid $dead is still alive"
touch "$W/sig/s.h5.tmp-$dead" "$W/sig/s.h5.tmp-$$" "$W/sig/other.h5.tmp-$dead"
$PACK synthetic --count 10 --size 4 -o "$W/sig/s.h5" --no-progress >/dev/null 2>"$W/stderr" || fail "pack over stale temporaries"
grep -q "^hetrain-pack: removed stale temporary file $W/sig/s.h5.tmp-$dead (left by process $dead, which is no longer running)\$" \
  "$W/stderr" || { cat "$W/stderr"; fail "no one-line notice of the stale temporary"; }
[ "$(wc -l <"$W/stderr")" -eq 1 ] || { cat "$W/stderr"; fail "more than the notice on stderr"; }
[ -e "$W/sig/s.h5.tmp-$dead" ] && fail "the stale temporary was not removed"
[ -e "$W/sig/s.h5.tmp-$$" ] || fail "the temporary of a live process was removed"
[ -e "$W/sig/other.h5.tmp-$dead" ] || fail "a temporary of another output was removed"
echo "ok: $(cat "$W/stderr")"
echo "PASS: hetrain-pack packs, inspects, verifies and reports bad input with one error line"
