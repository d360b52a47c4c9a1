#!/usr/bin/env bash
# bench/detect_recipe.sh — YOLOv5's training recipe against the plain one (docs/detection.md, "Training
# recipe"): yolov5n on generated detection data, 1 rank, the same data, batch, epochs and seeds, with
#   plain     lr RECIPE_LR, momentum 0.937 Nesterov, 1 linear warm-up epoch, cosine (the issue's setup)
#   warm-up   the same with YOLOv5's warm-up: max(3 epochs, 100 steps), biases from lr + 0.1, momentum from 0.8
#   +ema      the warm-up and YOLOv5's moving average of the weights (decay 0.9999, ramp 2000), validated
#   full      the +ema recipe with YOLOv5's augmentations (mosaic, affine, HSV, flip: hetrain's defaults for a
#             detector; the recipes above run with --no-augment)
#   pytorch   the plain recipe in PyTorch (bench/yolov5_reference.py: the same YAML network and initialisation,
#             YOLOv5's loss written from its formulas, the same data, schedule and gradient scale), scored
#             after each epoch by `hetrain eval --weights`; left out without python3-torch
# Prints mAP@0.5 and mAP@0.5:0.95 after every epoch (mean over the seeds), the final values per seed with
# their spread (max − min), and the first epoch at which each recipe reaches the plain one's final
# mAP@0.5:0.95; the reference's loss check against hetrain's; each recipe's data wait as a share of its
# step time, and the augmentations' data-path cost on colour images at a larger size (RECIPE_COST_SIZE,
# 320) with and without them. Never fails on a result.
#
# Knobs (environment): RECIPE_N (training images, 1536), RECIPE_SIZE (128), RECIPE_EPOCHS (6), RECIPE_B (32),
# RECIPE_LR (0.06), RECIPE_SEEDS ("1 2 3"), RECIPE_THREADS (2), RECIPE_ONLY (a list of the recipes to run),
# RECIPE_COST_SIZE (320; 0 leaves that part out), RECIPE_KEEP=1 keeps the logs.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin/hetrain
PACK=build/bin/hetrain-pack
N=${RECIPE_N:-1536}
SIZE=${RECIPE_SIZE:-128}
EPOCHS=${RECIPE_EPOCHS:-6}
B=${RECIPE_B:-32}
LR=${RECIPE_LR:-0.06}
SEEDS=${RECIPE_SEEDS:-1 2 3}
THREADS=${RECIPE_THREADS:-2}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
TMP=$(mktemp -d /tmp/hetrain-bench-recipe.XXXXXX)
if [ -n "${RECIPE_KEEP:-}" ]; then echo "detect_recipe: logs kept in $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
for b in "$BIN" "$PACK"; do [ -x "$b" ] || { echo "detect_recipe: $b is not built — skipped"; exit 0; }; done
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] \
  || { echo "detect_recipe: dataset-fashion-mnist is not installed (make deps) — skipped"; exit 0; }

echo "== YOLOv5's training recipe: yolov5n, $N generated ${SIZE}x${SIZE} images (300 test), 1 rank, $THREADS threads,"
echo "   B = $B, $EPOCHS epochs, lr $LR, momentum 0.937 Nesterov, no decay on BN and biases; seeds $SEEDS"
"$PACK" detect-synthetic --split train --count "$N" --size "$SIZE" --seed 1 --no-progress -o "$TMP/train.h5" >/dev/null &&
  "$PACK" detect-synthetic --split test --count 300 --size "$SIZE" --seed 2 --no-progress -o "$TMP/test.h5" >/dev/null ||
  { echo "detect_recipe: generating the data failed — skipped"; exit 0; }

COMMON=(--model models/yolov5n.yaml --data "$TMP/train.h5" --val "$TMP/test.h5" --global-batch "$B" --epochs "$EPOCHS"
        --lr "$LR" --momentum 0.937 --nesterov --no-bn-decay --device cpu --threads "$THREADS" --log-every 0)
WARM=(--warmup-epochs 3 --warmup-min-steps 100 --warmup-bias-lr 0.1 --warmup-momentum 0.8)
RECIPES="plain warm-up +ema full"
if /usr/bin/python3 -c 'import torch, h5py, yaml' 2>/dev/null; then RECIPES="$RECIPES pytorch"
else echo "   (no PyTorch reference: python3-torch, python3-h5py or python3-yaml is missing; make deps installs them)"; fi
[ -n "${RECIPE_ONLY:-}" ] && RECIPES=$RECIPE_ONLY
args_of() {
  case $1 in
    plain) echo --warmup-epochs 1 --no-augment ;;
    warm-up) echo "${WARM[@]}" --no-augment ;;
    +ema) echo "${WARM[@]}" --ema-decay 0.9999 --no-augment ;;
    full) echo "${WARM[@]}" --ema-decay 0.9999 ;;
  esac
}
# Data wait as a share of the step (compute + wait + communication + idle), steps after the first, from
# --metrics files.
wait_share() {
  cat "$@" | awk '
    function first(key) {  # the first rank'"'"'s value of "key":[v, ...]
      if (!match($0, "\"" key "\":\\[[^],]*")) return 0
      return substr($0, RSTART + length(key) + 4, RLENGTH - length(key) - 4)
    }
    /"wait_s"/ && !/"step":0,/ { w += first("wait_s"); t += first("compute_s") + first("wait_s") + first("comm_s") + first("idle_s") }
    END { if (t > 0) printf "%.2f%% (%.1f of %.0f s)", 100 * w / t, w, t; else printf "-" }'
}
# "epoch E: validation loss L, mAP@0.5 X, mAP@0.5:0.95 Y (N samples)" -> "E X Y"
curve() { sed -n 's/^epoch \([0-9]*\): validation .*mAP@0.5 \([0-9.]*\), mAP@0.5:0.95 \([0-9.]*\).*/\1 \2 \3/p' "$1"; }
reference() {  # seed: the plain recipe in PyTorch
  timeout 3600 /usr/bin/python3 bench/yolov5_reference.py --train "$TMP/train.h5" --test "$TMP/test.h5" \
    --model models/yolov5n.yaml --batch "$B" --epochs "$EPOCHS" --lr "$LR" --warmup-epochs 1 --seed "$1" \
    --threads "$THREADS" --hetrain "$BIN"
}
for recipe in $RECIPES; do
  for seed in $SEEDS; do
    log="$TMP/$recipe-$seed.log"
    if [ $recipe = pytorch ]; then
      reference "$seed" >"$log" 2>&1 || { echo "   the PyTorch reference (seed $seed) failed:"; tail -3 "$log"; }
      sed -n 's/^epoch \([0-9]*\): mAP@0.5 \([0-9.]*\), mAP@0.5:0.95 \([0-9.]*\).*/\1 \2 \3/p' "$log" >"$TMP/$recipe-$seed.curve"
      grep -h "^loss check" "$log" | sed 's/^/   seed '"$seed"': /'
      continue
    fi
    # shellcheck disable=SC2046
    timeout 3600 mpirun -n 1 "$BIN" train "${COMMON[@]}" $(args_of $recipe) --seed "$seed" \
      --metrics "$TMP/$recipe-$seed.jsonl" >"$log" 2>&1 \
      || { echo "   the $recipe run (seed $seed) failed:"; tail -3 "$log"; }
    curve "$log" >"$TMP/$recipe-$seed.curve"
  done
done

echo
echo "   mAP@0.5 / mAP@0.5:0.95 after each epoch, mean over the seeds:"
printf "   %-8s" recipe; for e in $(seq 1 "$EPOCHS"); do printf " %13s" "epoch $e"; done; echo
for recipe in $RECIPES; do
  printf "   %-8s" "$recipe"
  cat "$TMP/$recipe"-*.curve | awk -v n="$EPOCHS" '{ a[$1] += $2; b[$1] += $3; c[$1]++ }
    END { for (e = 1; e <= n; e++) if (c[e]) printf " %6.3f/%6.3f", a[e] / c[e], b[e] / c[e]; else printf " %13s", "-" }'
  echo
done
echo
echo "   final, per seed: mAP@0.5 (mean, spread) | mAP@0.5:0.95 (mean, spread)"
for recipe in $RECIPES; do
  for seed in $SEEDS; do tail -1 "$TMP/$recipe-$seed.curve"; done >"$TMP/$recipe.final"
  printf "   %-8s %s\n" "$recipe" "$(awk '{ v = v sprintf(" %.3f", $2); w = w sprintf(" %.3f", $3); s += $2; t += $3
      if (NR == 1 || $2 < lo) lo = $2; if (NR == 1 || $2 > hi) hi = $2; if (NR == 1 || $3 < lo2) lo2 = $3; if (NR == 1 || $3 > hi2) hi2 = $3 }
    END { if (NR) printf "%s (%.3f, %.3f) |%s (%.3f, %.3f)", v, s / NR, hi - lo, w, t / NR, hi2 - lo2 }' "$TMP/$recipe.final")"
done
target=$(awk '{ t += $3 } END { if (NR) printf "%.10f", t / NR }' "$TMP/plain.final")
echo
echo "   first epoch whose mean mAP@0.5:0.95 reaches plain's final mean ($(printf "%.3f" "$target")):"
for recipe in $RECIPES; do
  printf "   %-8s %s\n" "$recipe" "$(cat "$TMP/$recipe"-*.curve | awk -v t="$target" -v n="$EPOCHS" '{ b[$1] += $3; c[$1]++ }
    END { for (e = 1; e <= n; e++) if (c[e] && b[e] / c[e] >= t - 1e-9) { print "epoch " e; exit } print "not reached" }')"
done

echo
echo "   data wait, share of the step time (all seeds, steps after the first):"
for recipe in $RECIPES; do
  [ $recipe = pytorch ] && continue
  printf "   %-8s %s\n" "$recipe" "$(wait_share "$TMP/$recipe"-*.jsonl)"
done

COST=${RECIPE_COST_SIZE:-320}
if [ "$COST" -gt 0 ]; then
  echo
  echo "   the augmentations' data-path cost: colour ${COST}x${COST} images, B = 16, 12 steps, $THREADS threads:"
  "$PACK" detect-synthetic --split train --count 256 --size "$COST" --channels 3 --seed 3 --no-progress \
    -o "$TMP/cost.h5" >/dev/null || { echo "   generating the colour data failed"; exit 0; }
  for a in on off; do
    extra=(); [ $a = off ] && extra=(--no-augment)
    timeout 1800 mpirun -n 1 "$BIN" train --model models/yolov5n.yaml --data "$TMP/cost.h5" --global-batch 16 \
      --max-steps 12 --lr 0.01 --device cpu --threads "$THREADS" --log-every 0 "${extra[@]}" \
      --metrics "$TMP/cost-$a.jsonl" >"$TMP/cost-$a.log" 2>&1 || { echo "   the cost run ($a) failed:"; tail -3 "$TMP/cost-$a.log"; }
    printf "   augmentation %-3s  data wait %s, %s\n" $a "$(wait_share "$TMP/cost-$a.jsonl")" \
      "$(grep -oE '[0-9.]+ samples/s \(after the first step\)' "$TMP/cost-$a.log")"
  done
fi
