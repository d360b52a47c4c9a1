#!/usr/bin/env bash
# data_tools/hetrain_to_torch.py on bad input (docs/checkpoint-format.md, "Moving a model to PyTorch"):
# crafted root attributes (input_shape, num_classes, model, format; values of 50 MB among them) and outputs
# that cannot be written each end in one line "hetrain_to_torch: error: ..." (an attribute quoted in at most
# about 200 characters), exit status 1, no traceback, and nothing left at the output path.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
$PY -c 'import torch, h5py, numpy' 2>/dev/null || fail "missing python3-torch/h5py/numpy for $PY: run make deps"
TOOL=data_tools/hetrain_to_torch.py

"$HETRAIN" train --model mlp --synthetic 64 --synthetic-shape 1,8,8 --global-batch 16 --max-steps 2 --device cpu \
  --quiet --checkpoint-dir "$TMP/ck" || fail "training the checkpoint failed"
GOOD="$TMP/ck/checkpoint-00000002.h5"
$PY $TOOL "$GOOD" -o "$TMP/good.pt" >/dev/null || fail "hetrain's own checkpoint was refused"

# craft NAME ATTRIBUTE PYTHON-VALUE: a copy of the good checkpoint with one root attribute replaced
craft() {
  cp "$GOOD" "$TMP/$1.h5"
  $PY - "$TMP/$1.h5" "$2" "$3" <<'PY' || fail "could not craft $1"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs[sys.argv[2]] = eval(sys.argv[3], {"np": np})
PY
}
refused() {  # refused NAME PATTERN INPUT ARGS...: exit 1, one short line containing PATTERN, no output left
  local name=$1 pattern=$2 input=$3; shift 3
  mkdir -p "$TMP/out-$name"
  $PY $TOOL "$input" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  local rc=$?
  [ $rc -eq 1 ] || { cat "$TMP/$name.err"; fail "$name: exit $rc, expected 1"; }
  [ "$(wc -l <"$TMP/$name.err")" -eq 1 ] && grep -q '^hetrain_to_torch: error: ' "$TMP/$name.err" \
    || { head -c 2000 "$TMP/$name.err"; fail "$name: not one error line"; }
  grep -qF -- "$pattern" "$TMP/$name.err" || { head -c 2000 "$TMP/$name.err"; fail "$name: no '$pattern'"; }
  [ "$(wc -c <"$TMP/$name.err")" -le 600 ] || fail "$name: an error line of $(wc -c <"$TMP/$name.err") bytes"
  [ -z "$(ls -A "$TMP/out-$name")" ] || fail "$name: left $(ls -A "$TMP/out-$name")"
  echo "ok  $name: $(cut -c1-300 "$TMP/$name.err")"
}
craft shape-text input_shape '"abc"'
refused shape-text "input_shape must be 3 integers [C, H, W], got 'abc'" "$TMP/shape-text.h5" -o "$TMP/out-shape-text/m.pt"
craft shape-huge input_shape 'np.array([1, 2**40, 2**40], np.int64)'
refused shape-huge "input_shape [1, 1099511627776, 1099511627776] is not a sample hetrain trains on" "$TMP/shape-huge.h5" -o "$TMP/out-shape-huge/m.pt"
craft shape-large input_shape 'np.array([1, 100000, 100000], np.int64)'
refused shape-large "is not a sample hetrain trains on" "$TMP/shape-large.h5" -o "$TMP/out-shape-large/m.pt"
craft shape-other input_shape 'np.array([1, 2000, 2000], np.int64)'
refused shape-other "input_shape ([1, 2000, 2000]) does not fit /parameters/fc1.weight of shape [256, 64]" "$TMP/shape-other.h5" -o "$TMP/out-shape-other/m.pt"
craft shape-long input_shape 'np.arange(5000)'
refused shape-long "input_shape must be 3 integers [C, H, W], got int64 array of shape [5000]" "$TMP/shape-long.h5" -o "$TMP/out-shape-long/m.pt"
craft classes-huge num_classes 'np.int64(2**62)'
refused classes-huge "num_classes 4611686018427387904 is not between 1 and" "$TMP/classes-huge.h5" -o "$TMP/out-classes-huge/m.pt"
craft classes-other num_classes 'np.int64(1000)'
refused classes-other "num_classes (1000) does not fit /parameters/fc3.weight" "$TMP/classes-other.h5" -o "$TMP/out-classes-other/m.pt"
craft model-huge model '"m" * 50_000_000'
refused model-huge "... (50000000 characters)" "$TMP/model-huge.h5" -o "$TMP/out-model-huge/m.pt"
craft model-number model '5'
refused model-number "root attribute 'model' must be a string, got 5" "$TMP/model-number.h5" -o "$TMP/out-model-number/m.pt"
craft format-huge format '"x" * 50_000_000'
refused format-huge "format is 'xxxx" "$TMP/format-huge.h5" -o "$TMP/out-format-huge/m.pt"
refused no-folder "$TMP/out-no-folder/missing/m.pt: cannot write there: the folder $TMP/out-no-folder/missing does not exist" "$GOOD" -o "$TMP/out-no-folder/missing/m.pt"
refused folder "$TMP/out-folder: not a regular file (a folder)" "$GOOD" -o "$TMP/out-folder"
pass "12 bad inputs to hetrain_to_torch.py: one line each, attributes quoted short, exit 1, nothing written"
