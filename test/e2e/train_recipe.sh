#!/usr/bin/env bash
# YOLOv5's training recipe around the update (docs/detection.md, "Training recipe"): the warm-up's bias rate
# and momentum are announced and reach the run; the moving average of the weights (--ema-decay) follows
# YOLOv5's formula from checkpoint to checkpoint, is what validation and `hetrain eval` score and what
# data_tools/hetrain_to_torch.py exports (--no-ema: the trained weights), and carries
# across a resume on another number of ranks exactly; the asynchronous modes average the center.
source "$(dirname "$0")/lib.sh"
[ -x "$PACK" ] || skip "$PACK not built"
need_python numpy h5py

# 1. The warm-up: YOLOv5's max(3 epochs, 100 steps) is capped at a short run and announced with its rates.
$PACK detect-synthetic --size 64 --max-items 2 --seed 5 --no-progress --count 64 --split train -o "$TMP/det.h5" \
  >/dev/null || fail "packing detection data"
$PACK detect-synthetic --size 64 --max-items 2 --seed 6 --no-progress --count 32 --split test -o "$TMP/val.h5" \
  >/dev/null || fail "packing detection validation data"
DET=(--model models/yolov5n.yaml --data "$TMP/det.h5" --val "$TMP/val.h5" --global-batch 16 --epochs 2 --device cpu
     --lr 0.01 --momentum 0.937 --nesterov --no-bn-decay --log-every 0)
run_mpi 1 "${DET[@]}" --warmup-epochs 3 --warmup-min-steps 100 --warmup-bias-lr 0.1 --warmup-momentum 0.8 \
  >"$TMP/warm.out" 2>&1 || { cat "$TMP/warm.out"; fail "the warm-up run failed"; }
grep -q "peak lr 0.01, warm-up 8 steps (biases from lr + 0.1, momentum from 0.8)" "$TMP/warm.out" \
  || { cat "$TMP/warm.out"; fail "the warm-up is not announced as capped at the run's 8 steps"; }
run_mpi 1 "${DET[@]}" --warmup-epochs 1 --max-steps 4 --quiet --dump-params "$TMP/warm.bin" \
  --warmup-bias-lr 0.1 --warmup-momentum 0.8 || fail "a warm-up run failed"
run_mpi 1 "${DET[@]}" --warmup-epochs 1 --max-steps 4 --quiet --dump-params "$TMP/plain.bin" \
  || fail "a plain warm-up run failed"
float_compare "$TMP/warm.bin" "$TMP/plain.bin" 1e-4 \
  && fail "--warmup-bias-lr and --warmup-momentum changed nothing"

# 2. The moving average: checkpoint after every step; from each to the next, ema = d·ema + (1−d)·model with
#    d = 0.9·(1 − exp(−updates/2)), for the parameters and the running statistics.
run_mpi 1 "${DET[@]}" --max-steps 4 --ema-decay 0.9 --ema-ramp 2 --checkpoint-dir "$TMP/ck" --checkpoint-every 1 \
  --keep-checkpoints 10 >"$TMP/ema.out" 2>&1 || { cat "$TMP/ema.out"; fail "the --ema-decay run failed"; }
/usr/bin/python3 - "$TMP"/ck/checkpoint-0000000{1,2,3,4}.h5 <<'PY' || fail "the moving average does not follow YOLOv5's formula"
import sys, math, h5py, numpy as np
def flat(f, group):
    return np.concatenate([f[group][k][()].ravel().astype(np.float64) for k in sorted(f[group])])
prev = None
for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        n = int(f["ema"].attrs["updates"])
        cur = {g: flat(f, g) for g in ("parameters", "ema/parameters", "ema/buffers")}
        cur["buffers"] = np.concatenate([f["buffers"][k][()].ravel().astype(np.float64)
                                         for k in sorted(f["buffers"]) if not k.endswith("num_batches_tracked")])
    if prev is not None:
        d = 0.9 * (1 - math.exp(-n / 2))
        for model, avg in (("parameters", "ema/parameters"), ("buffers", "ema/buffers")):
            want = d * prev[avg] + (1 - d) * cur[model]
            err = np.abs(want - cur[avg]).max() / max(np.abs(want).max(), 1e-30)
            print("%s update %d: d %.5f, relative error %.2g" % (avg, n, d, err))
            if not err < 1e-5: sys.exit(1)
        if np.abs(cur["ema/parameters"] - cur["parameters"]).max() < 1e-6: sys.exit("the average equals the model")
    prev = cur
print("updates", n)
sys.exit(0 if n == 4 else 1)
PY
# Validation scores the average, and so does `hetrain eval` of the checkpoint (it says so).
val_loss=$(sed -n 's/^epoch 1: validation loss \([0-9.]*\),.*/\1/p' "$TMP/ema.out")
[ -n "$val_loss" ] || { cat "$TMP/ema.out"; fail "no validation line"; }
timeout 120 mpirun -n 2 "$HETRAIN" eval --checkpoint "$TMP/ck/checkpoint-00000004.h5" --data "$TMP/val.h5" \
  >"$TMP/eval.out" 2>&1 || { cat "$TMP/eval.out"; fail "eval of the --ema-decay checkpoint failed"; }
grep -q "step 4, moving average of the weights" "$TMP/eval.out" || { cat "$TMP/eval.out"; fail "eval does not say it scores the average"; }
grep -q "^samples 32  loss $val_loss " "$TMP/eval.out" \
  || { cat "$TMP/eval.out"; fail "eval's loss is not the validation's $val_loss"; }

# 3. Exact across a resume on other ranks: 2 steps on 4 ranks (split 4,0,8,4), stopped, 2 more on 2 ranks
#    (split 10,6), against 4 steps on 1 rank — with --bn sync, the model and the average alike.
CLS=(--model resnet20 --synthetic 256 --synthetic-shape 3,16,16 --global-batch 16 --max-steps 4 --lr 0.02
     --momentum 0.9 --bn sync --ema-decay 0.9 --ema-ramp 2 --quiet)
run_mpi 1 "${CLS[@]}" --checkpoint-dir "$TMP/one" || fail "the 1-rank --ema-decay run failed"
run_mpi 4 "${CLS[@]}" --split 4,0,8,4 --checkpoint-dir "$TMP/two" --stop-at-step 2 || fail "the 4-rank part failed"
run_mpi 2 "${CLS[@]}" --split 10,6 --checkpoint-dir "$TMP/two" --resume auto >"$TMP/resumed.out" 2>&1 \
  || { cat "$TMP/resumed.out"; fail "the resumed 2-rank part failed"; }
/usr/bin/python3 - "$TMP/one/checkpoint-00000004.h5" "$TMP/two/checkpoint-00000004.h5" <<'PY' \
  || fail "the average after a resume on other ranks differs from 1 rank's"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:])
assert a["ema"].attrs["updates"] == b["ema"].attrs["updates"] == 4
for g in ("parameters", "ema/parameters", "ema/buffers"):
    x = np.concatenate([a[g][k][()].ravel() for k in sorted(a[g])])
    y = np.concatenate([b[g][k][()].ravel() for k in sorted(b[g])])
    worst, scale = np.abs(x - y).max(), np.abs(x).max()
    print("%s: max |diff| %.3g (scale %.3g)" % (g, worst, scale))
    if not worst <= 1e-3 * scale + 1e-6: sys.exit(1)
PY

# The exported model is the average (as YOLOv5 exports its EMA); --no-ema exports the trained weights.
need_python torch
for which in ema raw; do
  flag=(); [ $which = raw ] && flag=(--no-ema)
  /usr/bin/python3 data_tools/hetrain_to_torch.py "$TMP/one/checkpoint-00000004.h5" "${flag[@]}" -o "$TMP/$which.pt" \
    >"$TMP/export.out" 2>&1 || { cat "$TMP/export.out"; fail "exporting the --ema-decay checkpoint ($which) failed"; }
done
/usr/bin/python3 - "$TMP/one/checkpoint-00000004.h5" "$TMP/ema.pt" "$TMP/raw.pt" <<'PY' || fail "the export is not the average"
import sys, h5py, numpy as np, torch
sys.path.insert(0, "data_tools")
import hetrain_models
f = h5py.File(sys.argv[1], "r")
for pt, group in ((sys.argv[2], "ema/"), (sys.argv[3], "")):
    sd = torch.load(pt)
    hetrain_models.build("resnet20", [3, 16, 16], 10).load_state_dict(sd, strict=True)
    for key, t in sd.items():
        if key.endswith("num_batches_tracked"): continue
        kind = "parameters" if key in f["parameters"] else "buffers"
        if not np.array_equal(t.numpy(), f[group + kind][key][()]): sys.exit("%s: %s is not /%s%s" % (pt, key, group, kind))
    print(pt, "moving average:", sd.hetrain["moving_average"])
    if sd.hetrain["moving_average"] != (group == "ema/"): sys.exit("the metadata does not say which weights")
PY

# 4. The asynchronous and hybrid modes average the elastic center, one update per push into it (rank 0 keeps
#    the average). One rank pushing after every update: from checkpoint to checkpoint the average follows
#    the formula with the center as the model; validation scores the average, and so does `hetrain eval`.
$PACK synthetic --count 256 --channels 1 --size 16 --classes 10 --seed 3 -o "$TMP/cls.h5" --no-progress >/dev/null \
  && $PACK synthetic --count 64 --channels 1 --size 16 --classes 10 --seed 4 -o "$TMP/cls-val.h5" --no-progress >/dev/null \
  || fail "packing the classification data failed"
ASYNC=(--model lenet --data "$TMP/cls.h5" --val "$TMP/cls-val.h5" --global-batch 32 --lr 0.05 --momentum 0.9
       --device cpu --ema-decay 0.9 --ema-ramp 2)
run_mpi 1 "${ASYNC[@]}" --mode async --elastic-every 1 --max-steps 4 --checkpoint-dir "$TMP/ack" --checkpoint-every 1 \
  --keep-checkpoints 10 >"$TMP/async.out" 2>&1 || { cat "$TMP/async.out"; fail "the async --ema-decay run failed"; }
/usr/bin/python3 - "$TMP"/ack/checkpoint-0000000{1,2,3,4}.h5 <<'PY' || fail "the center's average does not follow the formula"
import sys, math, h5py, numpy as np
prev = None
for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        n = int(f["ema"].attrs["updates"])
        cur = {g: np.concatenate([f[g][k][()].ravel().astype(np.float64) for k in sorted(f[g])])
               for g in ("parameters", "ema/parameters")}
    if prev is not None:
        d = 0.9 * (1 - math.exp(-n / 2))
        want = d * prev["ema/parameters"] + (1 - d) * cur["parameters"]
        err = np.abs(want - cur["ema/parameters"]).max() / max(np.abs(want).max(), 1e-30)
        print("update %d: d %.5f, relative error %.2g" % (n, d, err))
        if not err < 1e-5: sys.exit(1)
    prev = cur
sys.exit(0 if n == 4 else "%d updates, want 4" % n)
PY
val_loss=$(sed -n 's/^validation at sample .*: loss \([0-9.]*\),.*/\1/p' "$TMP/async.out" | tail -1)
[ -n "$val_loss" ] || { cat "$TMP/async.out"; fail "no validation line in async mode"; }
timeout 120 mpirun -n 1 "$HETRAIN" eval --checkpoint "$TMP/ack/checkpoint-00000004.h5" --data "$TMP/cls-val.h5" \
  >"$TMP/aeval.out" 2>&1 || { cat "$TMP/aeval.out"; fail "eval of the async checkpoint failed"; }
grep -q "moving average of the weights" "$TMP/aeval.out" && grep -q "^samples 64  loss $val_loss " "$TMP/aeval.out" \
  || { cat "$TMP/aeval.out"; fail "eval does not score the average the async validation scored ($val_loss)"; }
for mode in async hybrid; do
  run_mpi 2 "${ASYNC[@]}" --mode $mode --epochs 1 >"$TMP/$mode.out" 2>&1 \
    || { cat "$TMP/$mode.out"; fail "--mode $mode --ema-decay on 2 ranks failed"; }
done

# 5. Refused in one line: a decay outside [0, 1).
for args in "--ema-decay 1"; do
  run_mpi 2 --model resnet20 --synthetic 64 --synthetic-shape 3,16,16 --global-batch 16 $args >"$TMP/o" 2>"$TMP/e" \
    && fail "$args was accepted"
  [ "$(grep -c 'hetrain: error:' "$TMP/e")" -eq 1 ] && grep -q "ema-decay" "$TMP/e" \
    || { cat "$TMP/e"; fail "$args: not one line naming --ema-decay"; }
done
pass "the warm-up is announced and changes the run; the moving average follows YOLOv5's formula, is what validation, eval and the export give, and resumes exactly from 4 to 2 ranks; async averages the center"
