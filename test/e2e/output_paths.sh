#!/usr/bin/env bash
# An output never replaces an input or a device node (docs/architecture.md, "Invariants") (hetrain/output_paths.hpp,
# data_tools/hetrain_output_paths.py). Every output option of every tool (hetrain train --metrics,
# --dump-params, --dump-samples and the checkpoints; hetrain eval --save-json and --dump-batch; hetrain-pack
# -o and --val-output; hetrain_to_torch.py -o; torch_to_hetrain.py -o) is pointed at an input, a symbolic link
# to it, a character device, a FIFO, a folder and a file in a missing folder: each must exit non-zero before
# any work with one error line naming the option and the path, leave the input byte for byte as it was, the
# device a device, the FIFO a FIFO, and no new file anywhere. One run of each tool that writes a good output
# still works.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
need_python h5py numpy
W="$TMP/w"
mkdir -p "$W/dir" "$W/out"
mkfifo "$W/fifo" || fail "mkfifo"
# A character device: /dev/full, or one made here (root) when the machine has none.
DEV=/dev/full
if [ ! -c "$DEV" ]; then
  mknod "$W/full" c 1 7 2>/dev/null || skip "no /dev/full and mknod needs root"
  DEV="$W/full"
fi

# Small inputs: a dataset, a checkpoint, a config file, CIFAR-10 batch records, a file standing for a .pt.
$PACK synthetic --count 64 --size 8 --channels 1 --classes 4 -o "$W/d.h5" --no-progress >/dev/null || fail "packing d.h5"
$PACK synthetic --count 32 --size 8 --channels 1 --classes 4 --seed 2 -o "$W/v.h5" --no-progress >/dev/null \
  || fail "packing v.h5"
TRAIN=(--model mlp --global-batch 16 --max-steps 2 --device cpu --quiet)
"$HETRAIN" train "${TRAIN[@]}" --data "$W/d.h5" --checkpoint-dir "$W/ck" >/dev/null || fail "making a checkpoint"
cp "$W/ck/checkpoint-00000002.h5" "$W/c.h5"
printf 'seed = 3\n' >"$W/cfg.ini"
$PY -c "import sys, random; random.seed(1)
sys.stdout.buffer.write(bytes(random.randrange(256) if i % 3073 else random.randrange(10) for i in range(20 * 3073)))" \
  >"$W/cifar.bin" || fail "writing cifar.bin"
cp "$W/c.h5" "$W/state.pt"
cp "$W/d.h5" "$W/r1.h5"
for f in d.h5 v.h5 c.h5 cfg.ini cifar.bin state.pt; do ln -s "$f" "$W/link-$f"; done
(cd "$W" && find . -type f -exec sha256sum {} + | sort -k 2) >"$TMP/sums" || fail "sha256sum"
listing() { (cd "$W" && find . | sort); }
listing >"$TMP/listing"

N=0
TAGS=() WANTS=()
# launch TAG OPTION PATH CMD...: starts CMD in the background (its refusal is checked by settle).
launch() {
  local k=${#TAGS[@]}
  TAGS+=("$1") WANTS+=("$2 $3")
  shift 3
  { timeout 120 "$@" >"$TMP/out.$k" 2>"$TMP/err.$k"; echo $? >"$TMP/rc.$k"; } &
}
# settle: every launched command must have exited non-zero (not hung) with one error line naming its OPTION
# PATH; afterwards every input is unchanged, nothing was added or removed, the device and the FIFO are as
# they were.
settle() {
  wait
  local k rc lines
  for k in "${!TAGS[@]}"; do
    rc=$(cat "$TMP/rc.$k")
    [ "$rc" -ne 124 ] || fail "${TAGS[k]}: hung"
    [ "$rc" -ne 0 ] || { cat "$TMP/err.$k"; fail "${TAGS[k]}: exit 0"; }
    lines=$(grep -c ': error: ' "$TMP/err.$k")
    [ "$lines" -eq 1 ] || { cat "$TMP/err.$k"; fail "${TAGS[k]}: $lines error lines, expected 1"; }
    grep -qF -- "${WANTS[k]}" "$TMP/err.$k" || { cat "$TMP/err.$k"; fail "${TAGS[k]}: the error does not name '${WANTS[k]}'"; }
    echo "ok  ${TAGS[k]}: $(grep ': error: ' "$TMP/err.$k")"
    N=$((N + 1))
  done
  (cd "$W" && sha256sum --quiet -c "$TMP/sums") || fail "${TAGS[*]}: an input changed"
  [ -c "$DEV" ] || fail "${TAGS[*]}: $DEV is no longer a character device"
  [ -p "$W/fifo" ] || fail "${TAGS[*]}: the FIFO is no longer a FIFO"
  listing | cmp -s - "$TMP/listing" || { listing | diff "$TMP/listing" -; fail "${TAGS[*]}: files were added or removed"; }
  rm -f "$TMP"/out.* "$TMP"/err.* "$TMP"/rc.*
  TAGS=() WANTS=()
}
# refused TAG OPTION PATH CMD...: CMD is refused (launched now, checked by the next settle; the commands of
# a batch run at once, as they only read).
refused() { launch "$@"; }
# every_target TAG OPTION INPUT CMD...: refused() with OPTION at INPUT, a link to INPUT, the device, the
# FIFO, a folder and a file in a missing folder (CMD is followed by OPTION TARGET); INPUT "" (a command
# without inputs): the last four only.
every_target() {
  local tag=$1 option=$2 input=$3; shift 3
  local target
  for target in ${input:+"$W/$input" "$W/link-$input"} "$DEV" "$W/fifo" "$W/dir" "$W/missing/x"; do
    refused "$tag $option $(basename "$target")" "$option" "$target" "$@" "$option" "$target"
  done
  settle
}

# hetrain train: each output against --data, then the other inputs once each.
T=("$HETRAIN" train "${TRAIN[@]}")
every_target train --metrics d.h5 "${T[@]}" --data "$W/d.h5"
every_target train --dump-params d.h5 "${T[@]}" --data "$W/d.h5"
every_target train --dump-samples d.h5 "${T[@]}" --data "$W/d.h5"
refused "train --metrics onto --val" --metrics "$W/v.h5" "${T[@]}" --data "$W/d.h5" --val "$W/v.h5" --metrics "$W/v.h5"
refused "train --metrics onto --init-from" --metrics "$W/c.h5" "${T[@]}" --data "$W/d.h5" --init-from "$W/c.h5" \
  --metrics "$W/c.h5"
refused "train --dump-params onto --resume" --dump-params "$W/link-c.h5" "${T[@]}" --data "$W/d.h5" --resume "$W/c.h5" \
  --dump-params "$W/link-c.h5"
refused "train --dump-samples onto --config" --dump-samples "$W/cfg.ini" "${T[@]}" --data "$W/d.h5" \
  --config "$W/cfg.ini" --dump-samples "$W/cfg.ini"
refused "train --dump-params onto --metrics" --dump-params "$W/out/m" "${T[@]}" --data "$W/d.h5" --metrics "$W/out/m" \
  --dump-params "$W/out/m"
# The checkpoints: an input under a checkpoint's name in --checkpoint-dir would be overwritten or pruned.
refused "train --checkpoint-dir holding --init-from" "--checkpoint-dir $W/ck holds the input" "$W/ck/checkpoint-00000002.h5" \
  "${T[@]}" --data "$W/d.h5" --init-from "$W/ck/checkpoint-00000002.h5" --checkpoint-dir "$W/ck"
refused "train --checkpoint-dir onto --data" --checkpoint-dir "$W/d.h5: not a folder" "${T[@]}" --data "$W/d.h5" \
  --checkpoint-dir "$W/d.h5"
# Under mpirun only rank 1's output is the input: every rank stops at once, one line (rank 1's).
refused "train on 2 ranks, rank 1's --dump-samples" --dump-samples "$W/r1.h5" mpirun -n 2 "${T[@]}" \
  --data "$W/r1.h5" --dump-samples "$W/r%r.h5"
settle

# hetrain eval
E=("$HETRAIN" eval --checkpoint "$W/c.h5" --quiet --device cpu)
every_target eval --save-json d.h5 "${E[@]}" --data "$W/d.h5"
every_target eval --dump-batch c.h5 "${E[@]}" --data "$W/d.h5"
refused "eval --save-json onto --dump-batch" --save-json "$W/out/./b.h5" "${E[@]}" --data "$W/d.h5" \
  --dump-batch "$W/out/b.h5" --save-json "$W/out/./b.h5"
settle

# hetrain-pack
every_target pack -o cifar.bin $PACK cifar "$W/cifar.bin" --no-progress
every_target pack --val-output cifar.bin $PACK cifar "$W/cifar.bin" --no-progress -o "$W/out/t.h5" --val-fraction 0.2
every_target "pack synthetic" -o "" $PACK synthetic --count 8 --size 4 --no-progress

# The Python tools (their refusal comes before torch is imported)
every_target hetrain_to_torch.py -o c.h5 $PY data_tools/hetrain_to_torch.py "$W/c.h5"
every_target torch_to_hetrain.py -o state.pt $PY data_tools/torch_to_hetrain.py "$W/state.pt"

# Controls: good outputs still work.
"${T[@]}" --data "$W/d.h5" --val "$W/v.h5" --metrics "$W/out/m.jsonl" --dump-params "$W/out/p.bin" \
  --dump-samples "$W/out/s.txt" --checkpoint-dir "$W/ck2" >/dev/null || fail "train with good outputs"
[ -s "$W/out/m.jsonl" ] && [ -s "$W/out/p.bin" ] && [ -s "$W/out/s.txt" ] && [ -f "$W/ck2/checkpoint-00000002.h5" ] \
  || fail "train wrote not every output: $(ls "$W/out" "$W/ck2")"
"${E[@]}" --data "$W/d.h5" --dump-batch "$W/out/b.h5" >/dev/null || fail "eval with a good --dump-batch"
[ -s "$W/out/b.h5" ] || fail "eval wrote no --dump-batch"
$PACK cifar "$W/cifar.bin" --no-progress -o "$W/out/t.h5" --val-fraction 0.2 --val-output "$W/out/tv.h5" >/dev/null \
  || fail "pack with good outputs"
[ -s "$W/out/t.h5" ] && [ -s "$W/out/tv.h5" ] || fail "pack wrote not every output"
(cd "$W" && sha256sum --quiet -c "$TMP/sums") || fail "an input changed in the controls"
if $PY -c 'import torch' 2>/dev/null; then
  $PY data_tools/hetrain_to_torch.py "$W/c.h5" -o "$W/out/c.pt" >/dev/null || fail "hetrain_to_torch.py with a good -o"
  $PY data_tools/torch_to_hetrain.py "$W/out/c.pt" -o "$W/out/w.h5" >/dev/null || fail "torch_to_hetrain.py with a good -o"
  CONTROLS="train, eval, pack and both Python tools"
else
  echo "note: no torch for $PY: the Python tools' good outputs are not tried (make deps installs it)"
  CONTROLS="train, eval and pack (no torch here for the Python tools)"
fi
pass "$N outputs onto inputs, links, devices, FIFOs, folders and missing folders refused with one line, nothing changed; $CONTROLS still write good outputs"
