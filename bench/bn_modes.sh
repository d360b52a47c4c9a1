#!/usr/bin/env bash
# bench/bn_modes.sh — what --bn sync and --bn ghost:G cost and what they buy (make bench, section 11;
# docs/architecture.md "Batch norm"). Parts, each printed as it ends (BN_PARTS, default "a b c d"):
#
# (a) Step-time cost against --bn local, side by side: 2 ranks on this machine, fixed even split,
#     samples/s after the first step (the "done:" line), for resnet20 (3×32×32, B = 64), resnet50 (3×32×32,
#     B = 16) and yolov5n (generated detection data, 3×64×64, B = 16).
# (b) Accuracy under a dynamic split: resnet20 on Fashion-MNIST (1×28×28), 2 ranks with EMULATED speeds
#     {1, 0.25} (sleeps, not real hardware), B = 64, BN_STEPS steps, the uniform split (--balance none, the
#     DDP baseline) against dynamic balancing, each with local, sync and ghost:8 statistics; test accuracy
#     on the 10,000 test images and samples/s.
# (c) The same for a detector: yolov5n on generated detection data (BN_DET_N images of BN_DET_SIZE², 300 test
#     images), B = 32, BN_DET_EPOCHS epochs at lr BN_DET_LR with one warm-up epoch; mAP@0.5 and samples/s.
# (d) The cost of (a) across 2 "nodes" (scripts/netns-nodes.sh: network namespaces, TCP between them, links
#     shaped to 10 and 1 Gbit/s), one rank on each: sync's small allreduces pay the network's latency. Needs
#     root, iproute2 and unshare; otherwise prints why and skips.
# Same seed everywhere (BN_SEEDS, "1"). Prints; never fails on time.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/build/bin/hetrain
PACK=$PWD/build/bin/hetrain-pack
STEPS=${BN_STEPS:-200}
SEEDS=${BN_SEEDS:-1}
DET_N=${BN_DET_N:-1536}
DET_SIZE=${BN_DET_SIZE:-128}
DET_EPOCHS=${BN_DET_EPOCHS:-6}
DET_LR=${BN_DET_LR:-0.06}
PARTS=${BN_PARTS:-a b c d}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
export OMPI_MCA_rmaps_base_oversubscribe=1
SRC=/usr/share/datasets/fashion-mnist
echo "== 11. batch-norm statistics: --bn local / sync / ghost:8 (bench/bn_modes.sh)"
if [ ! -x "$BIN" ] || [ ! -x "$PACK" ]; then echo "   skipped: $BIN is not built"; exit 0; fi
TMP=$(mktemp -d /tmp/hetrain-bench-bn.XXXXXX)
NS=htbn      # part (d): namespaces htbn1, htbn2 (nodes) and htbnbr (the switch)
NET=10.78.0
source scripts/netns-nodes.sh
NODES=0      # part (d) made the namespaces
cleanup() { [ $NODES = 1 ] && netns_teardown; rm -rf "$TMP"; }
trap cleanup EXIT

rate() { sed -n 's/^done: .* \([0-9.]*\) samples\/s.*/\1/p' "$1" | tail -1; }
accuracy() { grep -oE 'accuracy +[0-9.]+%' "$1" | tail -1 | grep -oE '[0-9.]+'; }
map50() { sed -n 's/^done: .*val mAP@0.5 \([0-9.]*\).*/\1/p' "$1" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else printf "-" }'; }

# cost_table LAUNCH...: samples/s of each model with local, sync and ghost:8 statistics, 2 ranks started by
# LAUNCH (mpirun -n 2, or across the nodes).
cost_table() {
  [ -f "$TMP/det.h5" ] || $PACK detect-synthetic --size 64 --max-items 3 --seed 5 --no-progress --count 256 \
    --split train -o "$TMP/det.h5" >/dev/null || echo "   packing detection data failed"
  printf "   %-9s %10s %10s %10s  %10s %10s\n" model local sync ghost:8 sync/local ghost/local
  local model bn
  for model in resnet20 resnet50 yolov5n; do
    case $model in
      resnet20) args=(--model resnet20 --synthetic 4096 --synthetic-shape 3,32,32 --global-batch 64 --split 32,32
                      --max-steps 30) ;;
      resnet50) args=(--model resnet50 --synthetic 1024 --synthetic-shape 3,32,32 --global-batch 16 --split 8,8
                      --max-steps 12) ;;
      yolov5n) args=(--model models/yolov5n.yaml --data "$TMP/det.h5" --global-batch 16 --split 8,8 --max-steps 12
                     --device cpu) ;;
    esac
    declare -A r=()
    for bn in local sync ghost:8; do
      "$@" "$BIN" train "${args[@]}" --bn $bn --log-every 100000 >"$TMP/cost.out" 2>&1 || { r[$bn]=0; continue; }
      r[$bn]=$(rate "$TMP/cost.out")
    done
    printf "   %-9s %10s %10s %10s  %10s %10s\n" $model "${r[local]}" "${r[sync]}" "${r[ghost:8]}" \
      "$(ratio "${r[sync]}" "${r[local]}")" "$(ratio "${r[ghost:8]}" "${r[local]}")"
  done
}

# split_table HEADER EXTRACT TRAIN-ARGS...: 2 ranks at emulated speeds {1, 0.25} under the uniform split and
# dynamic balancing, each with local, sync and ghost:8 statistics; per seed, EXTRACT's figure from the log
# (accuracy, map50) and the samples/s.
split_table() {
  local header=$1 extract=$2 balance bn seed name values rates
  shift 2
  printf "   %-8s %-9s %8s %11s\n" split bn "$header" samples/s
  for balance in none dynamic; do
    for bn in local sync ghost:8; do
      values="" rates=""
      for seed in $SEEDS; do
        mpirun -n 2 "$BIN" train "$@" --emulate-speed 1,0.25 --seed "$seed" --balance $balance --bn $bn \
          >"$TMP/run.out" 2>&1 || { values+=" failed"; continue; }
        values+=" $($extract "$TMP/run.out")" rates+=" $(rate "$TMP/run.out")"
      done
      [ $balance = none ] && name=uniform || name=dynamic
      printf "   %-8s %-9s %8s %11s\n" $name $bn "$values" "$rates"
    done
  done
}

part_a() {
  echo "   (a) step-time cost, 2 ranks on this machine, even split; samples/s after the first step"
  cost_table mpirun -n 2
}

part_b() {
  echo "   (b) accuracy under a dynamic split: resnet20, Fashion-MNIST, 2 ranks at emulated speeds {1, 0.25}, B = 64,"
  echo "       $STEPS steps; test accuracy % / samples/s (seed(s) $SEEDS)"
  if [ ! -f $SRC/train-images-idx3-ubyte.gz ]; then echo "   skipped: dataset-fashion-mnist is not installed (make deps)"; return; fi
  $PACK idx --images $SRC/train-images-idx3-ubyte.gz --labels $SRC/train-labels-idx1-ubyte.gz -o "$TMP/train.h5" \
    --no-progress >/dev/null || return
  $PACK idx --images $SRC/t10k-images-idx3-ubyte.gz --labels $SRC/t10k-labels-idx1-ubyte.gz -o "$TMP/test.h5" \
    --no-progress >/dev/null || return
  split_table accuracy accuracy --model resnet20 --data "$TMP/train.h5" --val "$TMP/test.h5" --global-batch 64 \
    --max-steps "$STEPS" --lr 0.1 --momentum 0.9 --weight-decay 5e-4 --log-every 100000
}

part_c() {
  echo "   (c) mAP under a dynamic split: yolov5n, $DET_N generated ${DET_SIZE}x${DET_SIZE} images (300 test), 2 ranks at"
  echo "       emulated speeds {1, 0.25}, B = 32, $DET_EPOCHS epochs (lr $DET_LR, 1 warm-up epoch); mAP@0.5 / samples/s"
  if [ ! -f $SRC/train-images-idx3-ubyte.gz ]; then echo "   skipped: dataset-fashion-mnist is not installed (make deps)"; return; fi
  $PACK detect-synthetic --split train --count "$DET_N" --size "$DET_SIZE" --seed 1 --no-progress -o "$TMP/dtrain.h5" \
    >/dev/null && $PACK detect-synthetic --split test --count 300 --size "$DET_SIZE" --seed 2 --no-progress \
    -o "$TMP/dtest.h5" >/dev/null || { echo "   generating the detection data failed"; return; }
  split_table mAP@0.5 map50 --model models/yolov5n.yaml --data "$TMP/dtrain.h5" --val "$TMP/dtest.h5" \
    --global-batch 32 --epochs "$DET_EPOCHS" --lr "$DET_LR" --momentum 0.937 --no-bn-decay --warmup-epochs 1 \
    --device cpu --log-every 0
}

part_d() {
  echo "   (d) step-time cost across 2 nodes (network namespaces, TCP), one rank on each, even split"
  local missing rate
  missing=$(netns_missing)
  if [ -n "$missing" ]; then echo "   skipped: $missing"; return; fi
  netns_make 10gbit 2>"$TMP/netns.err" || { echo "   skipped: could not make the namespaces: $(head -1 "$TMP/netns.err")"; return; }
  NODES=1
  for rate in 10gbit 1gbit; do
    netns_set_rate $rate || { echo "   could not set the links to $rate"; continue; }
    echo "   links at $rate:"
    cost_table netns_mpirun -n 2 --map-by node
  done
}

for part in $PARTS; do
  echo
  case $part in
    a|b|c|d) part_$part ;;
    *) echo "bench/bn_modes.sh: unknown part '$part' (BN_PARTS: a b c d)" >&2 ;;
  esac
done
exit 0
