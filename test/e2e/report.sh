#!/usr/bin/env bash
# hetrain_report.py: figures from the metrics of real 4-rank runs (uniform and dynamic split), one file to a
# PNG, two compared in a PNG and an HTML page; bad inputs are one line on stderr, exit 1, no output left.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import matplotlib' || fail "missing python3-matplotlib: run make deps"
REPORT="/usr/bin/python3 data_tools/hetrain_report.py"
# 96 steps; ranks 2 and 3 emulate half and a quarter of the speed, so dynamic balancing moves the split.
ARGS=(--model lenet --synthetic 3072 --synthetic-shape 1,28,28 --global-batch 64 --epochs 2 --lr 0.05
      --emulate-speed 1,1,0.5,0.25 --device cpu --quiet)
run_mpi 4 "${ARGS[@]}" --balance none --metrics "$TMP/uniform.jsonl" || fail "uniform run exited non-zero"
run_mpi 4 "${ARGS[@]}" --balance dynamic --metrics "$TMP/dynamic.jsonl" --checkpoint-dir "$TMP/ckpt" \
  || fail "dynamic run exited non-zero"

# The report's sizes: 1400 x 1000 px per file, plus 1400 x 500 px for the comparison of several files.
$REPORT "$TMP/dynamic.jsonl" -o "$TMP/one.png" || fail "report of one file failed"
$REPORT "$TMP/uniform.jsonl" "$TMP/dynamic.jsonl" -o "$TMP/two.png" || fail "PNG comparing two files failed"
$REPORT "$TMP/uniform.jsonl" "$TMP/dynamic.jsonl" -o "$TMP/two.html" || fail "HTML comparing two files failed"
# The optional per-epoch validation accuracy ("val_accuracy" on the epoch's last line) is shown when present.
/usr/bin/python3 - "$TMP/dynamic.jsonl" "$TMP/val.jsonl" <<'PY' || fail "could not add val_accuracy"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for i, r in enumerate(rows):
        if i + 1 == len(rows) or rows[i + 1]["epoch"] != r["epoch"]:
            r["val_accuracy"] = 0.5 + 0.1 * r["epoch"]
        f.write(json.dumps(r) + "\n")
PY
$REPORT "$TMP/val.jsonl" -o "$TMP/val.html" || fail "report with val_accuracy failed"

/usr/bin/python3 - "$TMP" <<'PY' || fail "the figures are not what the report promises"
import base64, json, os, re, struct, sys
tmp = sys.argv[1]
def png_size(data, what):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "%s: no PNG signature" % what
    assert data[12:16] == b"IHDR", "%s: no IHDR chunk first" % what
    return struct.unpack(">II", data[16:24])
def check_png(data, what, size):
    got = png_size(data, what)
    assert got == size, "%s: %dx%d px, expected %dx%d" % ((what,) + got + size)
    assert len(data) > 20000, "%s: only %d bytes" % (what, len(data))
    print("%s: %dx%d px, %d bytes" % ((what,) + got + (len(data),)))
check_png(open(os.path.join(tmp, "one.png"), "rb").read(), "one.png", (1400, 1000))
check_png(open(os.path.join(tmp, "two.png"), "rb").read(), "two.png", (1400, 2500))
page = open(os.path.join(tmp, "two.html"), encoding="utf-8").read()
imgs = re.findall(r'<img [^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
assert len(imgs) == 3, "two.html: %d embedded images, expected 3" % len(imgs)
for i, (img, size) in enumerate(zip(imgs, [(1400, 500), (1400, 1000), (1400, 1000)])):
    check_png(base64.b64decode(img), "two.html image %d" % i, size)
for stem in ("uniform", "dynamic"):
    assert stem in page, "two.html does not name %s" % stem
assert "none" in page, "two.html: no 'none' for the missing validation accuracy"
# The highest resident memory of any rank (host_peak_mib), and "n/a" for the GPU: these ranks have none...
peak = max(max(json.loads(l)["host_peak_mib"]) for l in open(os.path.join(tmp, "dynamic.jsonl")))
assert "%.0f MiB (rank " % peak in page, "two.html: the peak resident memory %.0f MiB is not in the table" % peak
# ...and where device_peak_mib is 0 on every rank, 0 MiB is what the table says.
assert "0 MiB (rank 0)" in page, "two.html: no GPU memory figure"
val = open(os.path.join(tmp, "val.html"), encoding="utf-8").read()
assert "60.00%" in val, "val.html: the last epoch's validation accuracy (60.00%) is not in the summary"
# The dynamic run's split moved (the report marks it); the uniform one never did.
split = lambda f: [tuple(json.loads(l)["b"]) for l in open(os.path.join(tmp, f))]
u, d = split("uniform.jsonl"), split("dynamic.jsonl")
assert len(set(u)) == 1 and len(d) == 96 and len(set(d)) > 1, "uniform splits %d, dynamic %d" % (len(set(u)), len(set(d)))
print("%d steps; the dynamic run used %d splits" % (len(d), len(set(d))))
PY

# Bad inputs: one line on stderr naming the file, exit 1, nothing at the output path, no temporary file.
printf 'step 1 loss 2.3\nstep 2 loss 2.2\n' > "$TMP/notes.txt"
: > "$TMP/empty.jsonl"
printf '{"step":0,"loss":2.3}\n' > "$TMP/nosplit.jsonl"
head -3 "$TMP/dynamic.jsonl" > "$TMP/ranks.jsonl"
sed -n 4p "$TMP/dynamic.jsonl" | sed 's/"b":\[\([0-9]*\),/"b":[/' >> "$TMP/ranks.jsonl"
H5=$(ls "$TMP"/ckpt/checkpoint-*.h5 | head -1)
[ -f "$H5" ] || fail "the dynamic run wrote no checkpoint to use as an HDF5 file"
mkdir "$TMP/bad"
expect_error() {  # OUTPUT PATTERN INPUT...
  local out=$1 pattern=$2; shift 2
  local rc=0
  $REPORT "$@" -o "$out" > "$TMP/bad.out" 2> "$TMP/bad.err" || rc=$?
  [ $rc -eq 1 ] || fail "$*: exit $rc, expected 1"
  [ "$(wc -l < "$TMP/bad.err")" -eq 1 ] || fail "$*: stderr is not one line: $(cat "$TMP/bad.err")"
  grep -q "^hetrain report: error: .*$pattern" "$TMP/bad.err" || fail "$*: unexpected message: $(cat "$TMP/bad.err")"
  [ ! -e "$out" ] || fail "$*: left $out"
  [ -z "$(ls -A "$TMP/bad")" ] || fail "$*: left $(ls -A "$TMP/bad")"
  echo "refused: $(cat "$TMP/bad.err")"
}
expect_error "$TMP/bad/r.png" "$TMP/missing.jsonl: no such file" "$TMP/missing.jsonl"
expect_error "$TMP/bad/r.png" "$TMP/empty.jsonl: empty file" "$TMP/empty.jsonl"
expect_error "$TMP/bad/r.html" "$TMP/notes.txt: line 1 is not JSON" "$TMP/dynamic.jsonl" "$TMP/notes.txt"
expect_error "$TMP/bad/r.png" "$H5: an HDF5 file" "$H5"
/usr/bin/python3 -c 'print("[" * 100000 + "]" * 100000)' > "$TMP/deep.jsonl"  # deeper than Python's JSON reader goes
expect_error "$TMP/bad/r.png" "$TMP/deep.jsonl: line 1 nests JSON too deeply to read" "$TMP/deep.jsonl"
/usr/bin/python3 -c 'import sys; sys.stdout.write("[" * 100000)' > "$TMP/deep-cut.jsonl"  # the same, as a last line
expect_error "$TMP/bad/r.png" "$TMP/deep-cut.jsonl: line 1 nests JSON too deeply to read" "$TMP/deep-cut.jsonl"
expect_error "$TMP/bad/r.png" "$TMP/nosplit.jsonl: line 1 has no 'b', 'step_s'" "$TMP/nosplit.jsonl"
expect_error "$TMP/bad/r.png" "$TMP/ranks.jsonl: line 4 has 3 ranks, the first line has 4" "$TMP/ranks.jsonl"
expect_error "$TMP/bad/r.pdf" "$TMP/bad/r.pdf: unknown output extension '.pdf'" "$TMP/dynamic.jsonl"
expect_error "$TMP/bad/none/r.png" "$TMP/bad/none/r.png: cannot write" "$TMP/dynamic.jsonl"
pass "report: one run to a PNG, two compared in a PNG and an HTML page; 10 bad inputs refused"
