#!/usr/bin/env bash
# Config files and the command line (src/train/options.hpp):
#  - --print-config writes the effective configuration; --config of that file repeats the run bit for bit;
#  - the command line overrides the file; the checkpoint's /config holds the same text;
#  - an unknown key names the file and line; a missing file, a folder, a section, a line without '=', a
#    command-line-only key (help), a broken quoted value are one line;
#  - values round-trip whatever they hold (docs/config-file.md): paths with '#', leading blanks, quotes,
#    backslashes and a line break are printed quoted, read back as themselves and used as given; a
#    byte-order mark before the first key is ignored;
#  - an option of another mode (--groups outside hybrid, ...) or without the option it needs (--checkpoint-every
#    without --checkpoint-dir, --gamma without --schedule step, ...) is refused, while the defaults a printed file
#    lists for every mode are not;
#  - abbreviated or misspelt long options are errors naming the candidates, never another option.
source "$(dirname "$0")/lib.sh"
need_python h5py
RUN=(--model lenet --synthetic 256 --synthetic-shape 1,28,28 --global-batch 32 --max-steps 6 --lr 0.05
     --no-bn-decay --weight-decay 1e-4 --device cpu --quiet)
"$HETRAIN" train "${RUN[@]}" --print-config >"$TMP/run.ini" || fail "--print-config failed"
grep -qx "lr = 0.05" "$TMP/run.ini" && grep -qx "no-bn-decay = true" "$TMP/run.ini" \
  && grep -qx "weight-decay = 0.0001" "$TMP/run.ini" || { cat "$TMP/run.ini"; fail "--print-config misses options"; }
run_mpi 2 "${RUN[@]}" --dump-params "$TMP/cli.bin" --checkpoint-dir "$TMP/ck" || fail "command-line run failed"
run_mpi 2 --config "$TMP/run.ini" --dump-params "$TMP/file.bin" || fail "run from the config file failed"
cmp "$TMP/cli.bin" "$TMP/file.bin" || fail "the run from --print-config's file differs from the command-line run"
run_mpi 2 --config "$TMP/run.ini" --lr 0.02 --dump-params "$TMP/lower.bin" || fail "run with an override failed"
cmp -s "$TMP/cli.bin" "$TMP/lower.bin" && fail "--lr on the command line did not override the file"
"$HETRAIN" train --config "$TMP/run.ini" --lr 0.02 --print-config | grep -qx "lr = 0.02" || fail "override not printed"
/usr/bin/python3 - "$TMP/ck/checkpoint-00000006.h5" "$TMP/run.ini" <<'PY' || fail "the checkpoint's /config is not --print-config's text"
import sys, h5py
stored = h5py.File(sys.argv[1], "r")["config"][()].decode()
printed = open(sys.argv[2]).read()
# The run that wrote the checkpoint also had --dump-params and --checkpoint-dir on its command line.
extra = {l for l in stored.splitlines() if l.split(" = ")[0] in ("dump-params", "checkpoint-dir")}
assert set(stored.splitlines()) - extra == set(printed.splitlines()), (stored, printed)
PY

bad() {  # bad NAME PATTERN ARGS...: exit 2 with one error line containing PATTERN
  local name=$1 pattern=$2; shift 2
  "$HETRAIN" train "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ $rc -eq 2 ] || fail "$name: exit $rc, expected 2"
  [ "$(grep -c 'hetrain: error' "$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "$name: not one error line"; }
  grep -qF -- "$pattern" "$TMP/err" || { cat "$TMP/err"; fail "$name: no '$pattern' in the error"; }
  echo "ok  $name: $(head -c 1000 "$TMP/err")"
}
printf 'model = lenet\n# a comment\nglobal-bach = 32\n' >"$TMP/typo.ini"
bad "unknown key" "typo.ini:3: unknown key 'global-bach' (did you mean --global-batch?)" --config "$TMP/typo.ini"
printf '[train]\nmodel = lenet\n' >"$TMP/section.ini"
bad "section" "section.ini:1: sections are not used" --config "$TMP/section.ini"
printf 'model lenet\n' >"$TMP/noeq.ini"
bad "no '='" "noeq.ini:1: expected 'key = value'" --config "$TMP/noeq.ini"
bad "missing file" "--config $TMP/nothing.ini: cannot read the file" --config "$TMP/nothing.ini"
printf 'lr = fast\n' >"$TMP/value.ini"
bad "bad value" "value.ini" --config "$TMP/value.ini"
# A 10 MB line is shown clipped, not whole: a bad value (named by its line), an unknown key.
big=10000000
/usr/bin/python3 -c "import sys; open(sys.argv[1], 'w').write('epochs = ' + 'z' * $big + '\n')" "$TMP/huge-value.ini"
bad "huge value" "huge-value.ini:1: the argument ('zzzzzzzz" --config "$TMP/huge-value.ini"
grep -q "z…') for option 'epochs' is invalid" "$TMP/err" || fail "huge value: not clipped"
[ "$(wc -c <"$TMP/err")" -lt $((big / 1000)) ] || fail "huge value: the error holds $(wc -c <"$TMP/err") bytes"
/usr/bin/python3 -c "import sys; open(sys.argv[1], 'w').write('z' * $big + ' = 1\n')" "$TMP/huge-key.ini"
bad "huge key" "huge-key.ini:1: unknown key 'zzzzzzzz" --config "$TMP/huge-key.ini"
grep -q "z…' ($big bytes)" "$TMP/err" || fail "huge key: not clipped"
[ "$(wc -c <"$TMP/err")" -lt $((big / 1000)) ] || fail "huge key: the error holds $(wc -c <"$TMP/err") bytes"
bad "prefix of an option" "unknown option '--mod' (did you mean --model, --mode?)" --mod async
bad "abbreviation" "unknown option '--glob' (did you mean --global-batch?)" --glob 32
bad "typo" "unknown option '--epoch' (did you mean --epochs?)" --epoch 3
mkdir "$TMP/folder.ini"
bad "folder" "--config $TMP/folder.ini: is a folder, not a config file" --config "$TMP/folder.ini"
printf 'model = lenet\nhelp = 1\n' >"$TMP/help.ini"
bad "help in a file" "help.ini:2: 'help' is for the command line (--help)" --config "$TMP/help.ini"
printf 'metrics = "m.jsonl\n' >"$TMP/open.ini"
bad "unclosed quote" "open.ini:1: metrics: the quoted value has no closing" --config "$TMP/open.ini"
printf 'metrics = "m\\t.jsonl"\n' >"$TMP/escape.ini"
bad "unknown escape" "escape.ini:1: metrics: unknown escape" --config "$TMP/escape.ini"
printf 'metrics = "m.jsonl" x\n' >"$TMP/after.ini"
bad "text after the quote" "after.ini:1: metrics: text after the closing quote" --config "$TMP/after.ini"

# Options of one mode, in another: refused, from the command line and from a file alike.
bad "groups in sync" "--groups applies to --mode hybrid only, and this run is --mode sync" --mode sync --groups 0,0,1,1
bad "groups in async" "--groups applies to --mode hybrid only" --mode async --groups 0,0
bad "alpha in sync" "--elastic-alpha applies to --mode async and hybrid only" --elastic-alpha 0.5
bad "split in hybrid" "--split applies to --mode sync only, and this run is --mode hybrid" --mode hybrid --split 16,16
printf 'mode = sync\nlocal-batch = 8\n' >"$TMP/local.ini"
bad "local batch in a file" "--local-batch applies to --mode async and hybrid only" --config "$TMP/local.ini"
# Options that need another (one table in hetrain_main.cpp): refused the same way, never ignored.
bad "every without a folder" "--checkpoint-every needs --checkpoint-dir (the folder checkpoints go to), and this run has none" \
  --checkpoint-every 5
bad "keep without a folder" "--keep-checkpoints needs --checkpoint-dir" --keep-checkpoints 2
bad "milestones with cosine" "--milestones applies to --schedule step only, and this run is --schedule cosine" --milestones 1,2
bad "gamma with constant" "--gamma applies to --schedule step only, and this run is --schedule constant" \
  --schedule constant --gamma 0.5
bad "rebalance without balancing" "--rebalance-every applies to --balance static and dynamic only, and this run is --balance none" \
  --balance none --rebalance-every 5
bad "ramp without an average" "--ema-ramp needs --ema-decay" --ema-ramp 100
bad "validation points without validation" "--val-every-samples needs --val or --synthetic-val" --val-every-samples 64
bad "no augment with mosaic" "--mosaic asks for an augmentation, and --no-augment turns every augmentation off" \
  --no-augment --mosaic 0.5
printf 'ema-ramp = 10\n' >"$TMP/ramp.ini"
bad "ramp in a file" "--ema-ramp needs --ema-decay" --config "$TMP/ramp.ini"
"$HETRAIN" train --schedule step --milestones 1 --gamma 0.5 --print-config >/dev/null \
  || fail "--milestones and --gamma with --schedule step were refused"
# A printed sync configuration lists every mode's defaults; switching its mode must not trip over them.
"$HETRAIN" train --config "$TMP/run.ini" --mode async --print-config >"$TMP/async.ini" \
  && grep -qx "mode = async" "$TMP/async.ini" || fail "a printed configuration with --mode async was refused"

# Hostile values: every path below reads back as itself and is where the run writes.
CK="$TMP/ck #1 \"q\" back\\slash"
METRICS="$TMP/m #2.jsonl"
LEAD="  lead"  # a relative path that starts with blanks
NL="$TMP/line
break.txt"
cd "$TMP" || fail "cannot enter $TMP"
"$OLDPWD/$HETRAIN" train "${RUN[@]}" --checkpoint-dir "$CK" --metrics "$METRICS" --dump-params "$LEAD" \
  --dump-samples "$NL" --print-config >hostile.ini || fail "--print-config with hostile paths failed"
cd "$OLDPWD" || fail "cannot go back"
grep -q '^checkpoint-dir = ".*ck #1 \\"q\\" back\\\\slash"$' "$TMP/hostile.ini" && grep -qx 'dump-params = "  lead"' "$TMP/hostile.ini" \
  && grep -q '^dump-samples = ".*line\\nbreak.txt"$' "$TMP/hostile.ini" || { cat "$TMP/hostile.ini"; fail "hostile values not quoted"; }
[ "$(grep -c = "$TMP/hostile.ini")" -eq "$(wc -l <"$TMP/hostile.ini")" ] || fail "a value broke a line of the printed file"
# With a byte-order mark and Windows line ends, as an editor may save it.
{ printf '\xef\xbb\xbf'; sed 's/$/\r/' "$TMP/hostile.ini"; } >"$TMP/hostile-bom.ini"
cd "$TMP" || fail "cannot enter $TMP"
"$OLDPWD/$HETRAIN" train --config hostile-bom.ini --print-config >again.ini || fail "reading the printed hostile file failed"
cmp hostile.ini again.ini || { diff hostile.ini again.ini; fail "the hostile values did not read back as themselves"; }
timeout 300 "$OLDPWD/$HETRAIN" train --config hostile-bom.ini >hostile.out 2>&1 || { cat hostile.out; fail "the run from the hostile file failed"; }
cd "$OLDPWD" || fail "cannot go back"
[ -f "$CK/checkpoint-00000006.h5" ] && [ -s "$METRICS" ] && [ -s "$TMP/$LEAD" ] && [ -s "$NL" ] \
  || { ls -la "$TMP"; fail "the run did not write to the exact hostile paths"; }
/usr/bin/python3 - "$CK/checkpoint-00000006.h5" "$TMP/hostile.ini" <<'PY' || fail "the checkpoint's /config is not the printed hostile text"
import sys, h5py
stored = h5py.File(sys.argv[1], "r")["config"][()].decode()
assert stored == open(sys.argv[2]).read(), (stored, open(sys.argv[2]).read())
PY
echo "ok  hostile paths: quoted, read back, written to as given"
pass "config files repeat a run bit for bit, the command line overrides them, values round-trip quoted, bad keys" \
  "and quotes name file and line, options of another mode or without the one they need and abbreviations are refused"
