#!/usr/bin/env bash
# bench/powersgd_training.sh — does --compress powersgd:R train like the exact reduction? hetrain and
# PyTorch's own powerSGD_hook (DDP, gloo; bench/pytorch_powersgd.py) side by side in one run, each against
# its own exact run (they differ in initialisation and sample order, not in the method). resnet20, 2 ranks,
# global batch 64, lr 0.05, cosine, 1,024 synthetic 3x16x16 samples packed by hetrain-pack (seed 2); the
# figures are mean training losses (docs/architecture.md, "PowerSGD"). Prints; never fails on a figure.
#
#  1. 2 epochs (32 steps), compression from step 4: mean loss per run and its gap to the exact run of the
#     same seed, hetrain with --balance none and with the default (dynamic), PyTorch (an even split).
#  2. 8 epochs, compression from step 12: per run the largest ratio of an epoch's mean loss to the previous
#     epoch's (a spike is > 2) and the last epoch's loss, for the exact run and ranks 4, 8, 16.
# Knobs (environment): POWERSGD_SEEDS ("1 2 3": part 1), POWERSGD_LONG_SEEDS ("1 2 3 4 5": part 2),
# POWERSGD_RANKS ("4 8 16"), POWERSGD_PARTS ("short long"), POWERSGD_KEEP=1 keeps the metrics.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/build/bin
PY=/usr/bin/python3
SEEDS=${POWERSGD_SEEDS:-1 2 3}
LONG_SEEDS=${POWERSGD_LONG_SEEDS:-1 2 3 4 5}
RANKS=${POWERSGD_RANKS:-4 8 16}
PARTS=${POWERSGD_PARTS:-short long}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/hetrain-powersgd.XXXXXX)
[ "${POWERSGD_KEEP:-0}" = 1 ] && echo "powersgd: keeping $TMP" || trap 'rm -rf "$TMP"' EXIT
"$BIN/hetrain-pack" synthetic --count 1024 --channels 3 --size 16 --seed 2 -o "$TMP/train.h5" >/dev/null 2>&1 ||
  { echo "powersgd: skipped: hetrain-pack failed"; exit 0; }
TORCH=1
"$PY" -c 'import torch, h5py' 2>/dev/null || { TORCH=0; echo "   PyTorch: skipped (/usr/bin/python3 cannot import torch and h5py)"; }
PORT=$((29700 + $$ % 200))
RESULTS=$TMP/results.txt

# One run → a line "impl part balance rank seed mean e1,e2,...". rank 0 = exact.
hetrain_run() {  # part epochs start balance rank seed
  local part=$1 epochs=$2 start=$3 balance=$4 rank=$5 seed=$6 compress=none
  [ "$rank" != 0 ] && compress=powersgd:$rank
  local out=$TMP/ht-$part-$balance-$rank-$seed
  if ! mpirun -n 2 "$BIN/hetrain" train --data "$TMP/train.h5" --model resnet20 --global-batch 64 --lr 0.05 \
      --epochs "$epochs" --seed "$seed" --balance "$balance" --compress "$compress" --compress-start "$start" \
      --log-every 0 --quiet --metrics "$out.jsonl" >"$out.log" 2>&1; then
    echo "   hetrain $compress seed $seed failed: $(grep -m1 -i error "$out.log" || tail -1 "$out.log")" >&2
    return
  fi
  "$PY" - "$out.jsonl" "$epochs" "$part $balance $rank $seed" <<'PY' >>"$RESULTS"
import json, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l]
epochs = int(sys.argv[2]); per = len(losses) // epochs
means = [sum(losses[e * per:(e + 1) * per]) / per for e in range(epochs)]
print("hetrain", sys.argv[3], "%.5f" % (sum(losses) / len(losses)), ",".join("%.5f" % m for m in means))
PY
}
torch_run() {  # part epochs start rank seed
  [ "$TORCH" = 1 ] || return
  local part=$1 epochs=$2 start=$3 rank=$4 seed=$5 line
  PORT=$((PORT + 1))
  line=$("$PY" bench/pytorch_powersgd.py --data "$TMP/train.h5" --rank "$rank" --start "$start" --epochs "$epochs" \
         --seed "$seed" --port "$PORT" 2>"$TMP/torch.err" | grep '^mean=')
  if [ -z "$line" ]; then echo "   PyTorch rank $rank seed $seed failed: $(tail -1 "$TMP/torch.err")" >&2; return; fi
  echo "pytorch $part even $rank $seed $(sed 's/mean=//; s/ epochs=/ /' <<<"$line")" >>"$RESULTS"
}

echo "== PowerSGD training against the exact reduction: hetrain and PyTorch's powerSGD_hook, resnet20, 2 ranks"
for part in $PARTS; do
  case $part in
    short) for seed in $SEEDS; do
             for r in 0 $RANKS; do hetrain_run short 2 4 none "$r" "$seed"; torch_run short 2 4 "$r" "$seed"; done
             for r in 0 4; do hetrain_run short 2 4 dynamic "$r" "$seed"; done
           done ;;
    long) for seed in $LONG_SEEDS; do
            for r in 0 $RANKS; do hetrain_run long 8 12 dynamic "$r" "$seed"; torch_run long 8 12 "$r" "$seed"; done
          done ;;
    *) echo "powersgd: unknown part '$part' (short, long)" >&2 ;;
  esac
done
[ -s "$RESULTS" ] && "$PY" bench/powersgd_report.py "$RESULTS"
exit 0
