#!/usr/bin/env bash
# Weights in (docs/checkpoint-format.md, "Starting from other weights"): a detector's weights go to PyTorch
# and back (hetrain_to_torch.py, torch_to_hetrain.py) and `hetrain train --init-from` of the round trip
# trains exactly what --init-from of the checkpoint itself trains, on 2 ranks, and not what a fresh start
# trains, and `hetrain eval --weights` scores them as it scores the checkpoint; a classifier fine-tuned to another class count keeps its new head's initialisation and says so;
# a damaged file, a file of another kind and --init-from with --resume are refused in one line.
source "$(dirname "$0")/lib.sh"
[ -x "$PACK" ] || skip "$PACK not built"
need_python numpy h5py torch yaml
PY=/usr/bin/python3

# 1. yolov5n: 2 steps, checkpoint; out to PyTorch and back in.
$PACK detect-synthetic --size 64 --max-items 2 --seed 4 --no-progress --count 32 --split train -o "$TMP/det.h5" \
  >/dev/null || fail "packing detection data"
DET=(--model models/yolov5n.yaml --data "$TMP/det.h5" --global-batch 8 --device cpu --lr 0.001 --quiet)
run_mpi 1 "${DET[@]}" --max-steps 2 --checkpoint-dir "$TMP/ck" || fail "the first yolov5n run failed"
ck="$TMP/ck/checkpoint-00000002.h5"
$PY data_tools/hetrain_to_torch.py "$ck" -o "$TMP/det.pt" >"$TMP/out.log" 2>&1 || { cat "$TMP/out.log"; fail "export failed"; }
$PY data_tools/torch_to_hetrain.py "$TMP/det.pt" -o "$TMP/det-weights.h5" >"$TMP/in.log" 2>&1 \
  || { cat "$TMP/in.log"; fail "torch_to_hetrain.py refused an exported state_dict"; }
grep -q "written to $TMP/det-weights.h5" "$TMP/in.log" || { cat "$TMP/in.log"; fail "no summary line"; }
run_mpi 2 "${DET[@]}" --max-steps 2 --init-from "$ck" --dump-params "$TMP/from-ck.bin" >"$TMP/a.out" 2>&1 \
  || { cat "$TMP/a.out"; fail "--init-from the checkpoint failed"; }
run_mpi 2 "${DET[@]}" --max-steps 2 --init-from "$TMP/det-weights.h5" --dump-params "$TMP/from-torch.bin" \
  >"$TMP/b.out" 2>&1 || { cat "$TMP/b.out"; fail "--init-from the converted weights failed"; }
grep -q "init-from: .*det-weights.h5 (weights of .*det.pt): 291 tensors loaded, every tensor of the model" "$TMP/b.out" \
  || { cat "$TMP/b.out"; fail "the run does not say what it loaded"; }
run_mpi 2 "${DET[@]}" --max-steps 2 --dump-params "$TMP/fresh.bin" || fail "the fresh run failed"
float_compare "$TMP/from-ck.bin" "$TMP/from-torch.bin" 0 || fail "the round trip through PyTorch changed the weights"
float_compare "$TMP/from-ck.bin" "$TMP/fresh.bin" 1e-3 && fail "--init-from trained what a fresh start trains"
# hetrain eval scores a weights file of a named model as it scores the checkpoint it came from.
timeout 120 mpirun -n 2 "$HETRAIN" eval --checkpoint "$ck" --data "$TMP/det.h5" --device cpu --quiet >"$TMP/e-ck" \
  || fail "eval of the checkpoint failed"
timeout 120 mpirun -n 2 "$HETRAIN" eval --weights "$TMP/det-weights.h5" --model models/yolov5n.yaml --data "$TMP/det.h5" \
  --device cpu --quiet >"$TMP/e-w" || fail "eval --weights failed"
grep -q "^samples 32 " "$TMP/e-ck" && cmp "$TMP/e-ck" "$TMP/e-w" || fail "eval --weights: $(cat "$TMP/e-w") against $(cat "$TMP/e-ck")"

# 2. Fine-tuning to another class count: resnet20 of 10 classes into one of 5; its fc keeps its initialisation.
run_mpi 1 --model resnet20 --synthetic 64 --synthetic-shape 3,16,16 --global-batch 16 --max-steps 1 \
  --checkpoint-dir "$TMP/cls" --quiet || fail "the resnet20 run failed"
run_mpi 1 --model resnet20 --synthetic 64 --synthetic-shape 3,16,16 --synthetic-classes 5 --global-batch 16 \
  --max-steps 1 --init-from "$TMP/cls/checkpoint-00000001.h5" >"$TMP/ft.out" 2>&1 || { cat "$TMP/ft.out"; fail "fine-tuning failed"; }
grep -q "2 keep their initialisation (not in the file in this shape): fc.weight, fc.bias" "$TMP/ft.out" \
  || { cat "$TMP/ft.out"; fail "the new head is not named"; }

# 3. Refused in one line: a changed tensor, a dataset, --init-from with --resume; the converter's bad input.
cp "$TMP/det-weights.h5" "$TMP/bad.h5"
$PY -c "import h5py,sys; f=h5py.File(sys.argv[1],'r+'); d=f['parameters/model.0.conv.weight']; d[0,0,0,0]+=1" "$TMP/bad.h5"
refused() {  # refused PATTERN ARGS...
  local pattern=$1; shift
  run_mpi 2 "${DET[@]}" --max-steps 1 "$@" >"$TMP/o" 2>"$TMP/e" && fail "accepted: $*"
  [ "$(grep -c 'hetrain: error:' "$TMP/e")" -eq 1 ] && grep -q "$pattern" "$TMP/e" || { cat "$TMP/e"; fail "$*: not one line with '$pattern'"; }
}
refused "bad.h5: checksum mismatch" --init-from "$TMP/bad.h5"
refused "det.h5: not a hetrain checkpoint or weights file" --init-from "$TMP/det.h5"
refused "give one of them" --init-from "$ck" --resume "$ck"
$PY data_tools/torch_to_hetrain.py "$TMP/det.h5" -o "$TMP/x.h5" 2>"$TMP/e" && fail "the converter took an HDF5 dataset"
[ "$(wc -l <"$TMP/e")" -eq 1 ] && grep -q "torch_to_hetrain: error: .*det.h5" "$TMP/e" || { cat "$TMP/e"; fail "the converter's refusal is not one line"; }
[ ! -e "$TMP/x.h5" ] || fail "the converter left an output for a refused input"
pass "yolov5n's weights go to PyTorch and back unchanged and --init-from trains from them; a new head keeps its initialisation; bad files are refused in one line"
