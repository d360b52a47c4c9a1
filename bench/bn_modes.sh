#!/usr/bin/env bash
# bench/bn_modes.sh — what --bn sync and --bn ghost:G cost and what they buy (make bench, section 11;
# docs/architecture.md "Batch norm").
#
# (a) Step-time cost against --bn local, side by side in one run: 2 ranks on this machine, fixed even
#     split, samples/s after the first step (the "done:" line), for resnet20 (3×32×32, B = 64) and yolov5n
#     (generated detection data, 3×64×64, B = 16).
# (b) Accuracy under a dynamic split: resnet20 on Fashion-MNIST (1×28×28), 2 ranks with EMULATED speeds
#     {1, 0.25} (sleeps, not real hardware), B = 64, BN_STEPS steps, the uniform split (--balance none, the
#     DDP baseline) against dynamic balancing, each with local, sync and ghost:8 statistics; test accuracy
#     on the 10,000 test images and samples/s. Same seed everywhere.
# Prints; never fails on time. Knobs: BN_STEPS (200), BN_SEEDS ("1").
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin/hetrain
PACK=build/bin/hetrain-pack
STEPS=${BN_STEPS:-200}
SEEDS=${BN_SEEDS:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
export OMPI_MCA_rmaps_base_oversubscribe=1
SRC=/usr/share/datasets/fashion-mnist
echo "== 11. batch-norm statistics: --bn local / sync / ghost:8 (bench/bn_modes.sh)"
if [ ! -x "$BIN" ] || [ ! -x "$PACK" ]; then echo "   skipped: $BIN is not built"; exit 0; fi
TMP=$(mktemp -d /tmp/hetrain-bench-bn.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

rate() { sed -n 's/^done: .* \([0-9.]*\) samples\/s.*/\1/p' "$1" | tail -1; }
accuracy() { grep -oE 'accuracy +[0-9.]+%' "$1" | tail -1 | grep -oE '[0-9.]+'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }

echo "   (a) step-time cost, 2 ranks, even split; samples/s after the first step"
$PACK detect-synthetic --size 64 --max-items 3 --seed 5 --no-progress --count 256 --split train -o "$TMP/det.h5" \
  >/dev/null || echo "   packing detection data failed"
printf "   %-9s %10s %10s %10s  %10s %10s\n" model local sync ghost:8 sync/local ghost/local
for model in resnet20 yolov5n; do
  if [ $model = resnet20 ]; then
    args=(--model resnet20 --synthetic 4096 --synthetic-shape 3,32,32 --global-batch 64 --split 32,32 --max-steps 30)
  else
    args=(--model models/yolov5n.yaml --data "$TMP/det.h5" --global-batch 16 --split 8,8 --max-steps 12 --device cpu)
  fi
  declare -A r=()
  for bn in local sync ghost:8; do
    mpirun -n 2 "$BIN" train "${args[@]}" --bn $bn --log-every 100000 >"$TMP/cost.out" 2>&1 || { r[$bn]=0; continue; }
    r[$bn]=$(rate "$TMP/cost.out")
  done
  printf "   %-9s %10s %10s %10s  %10s %10s\n" $model "${r[local]}" "${r[sync]}" "${r[ghost:8]}" \
    "$(ratio "${r[sync]}" "${r[local]}")" "$(ratio "${r[ghost:8]}" "${r[local]}")"
done

echo
echo "   (b) accuracy under a dynamic split: resnet20, Fashion-MNIST, 2 ranks at emulated speeds {1, 0.25}, B = 64,"
echo "       $STEPS steps; test accuracy % / samples/s (seed(s) $SEEDS)"
if [ ! -f $SRC/train-images-idx3-ubyte.gz ]; then echo "   skipped: dataset-fashion-mnist is not installed (make deps)"; exit 0; fi
$PACK idx --images $SRC/train-images-idx3-ubyte.gz --labels $SRC/train-labels-idx1-ubyte.gz -o "$TMP/train.h5" --no-progress >/dev/null || exit 0
$PACK idx --images $SRC/t10k-images-idx3-ubyte.gz --labels $SRC/t10k-labels-idx1-ubyte.gz -o "$TMP/test.h5" --no-progress >/dev/null || exit 0
printf "   %-8s %-9s %8s %11s\n" split bn accuracy samples/s
for balance in none dynamic; do
  for bn in local sync ghost:8; do
    accs="" rates=""
    for seed in $SEEDS; do
      mpirun -n 2 "$BIN" train --model resnet20 --data "$TMP/train.h5" --val "$TMP/test.h5" --global-batch 64 \
        --max-steps "$STEPS" --lr 0.1 --momentum 0.9 --weight-decay 5e-4 --emulate-speed 1,0.25 --seed "$seed" \
        --balance $balance --bn $bn --log-every 100000 >"$TMP/acc.out" 2>&1 || { accs+=" failed"; continue; }
      accs+=" $(accuracy "$TMP/acc.out")" rates+=" $(rate "$TMP/acc.out")"
    done
    [ $balance = none ] && name=uniform || name=dynamic
    printf "   %-8s %-9s %8s %11s\n" $name $bn "$accs" "$rates"
  done
done
exit 0
