#!/usr/bin/env bash
# Config files and the command line (src/train/options.hpp):
#  - --print-config writes the effective configuration; --config of that file repeats the run bit for bit;
#  - the command line overrides the file; the checkpoint's /config holds the same text;
#  - an unknown key names the file and line; a missing file, a section, a line without '=' are one line;
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
pass "config files repeat a run bit for bit, the command line overrides them, bad keys name file and line, abbreviations are refused"
