#!/usr/bin/env bash
# bench/detect_hetero.sh — a detector on an unlike cluster: yolov5n on generated detection data, 4 ranks with
# EMULATED speeds {1, 1, 0.5, 0.25} (sleeps, not real hardware), the uniform split (--balance none, what DDP
# and Horovod do) against the balancer (--balance dynamic), same samples, same validation points.
# Prints samples/s, the mAP@0.5 at each validation with the training time it took, and the time each run
# needed to first reach a fixed mAP. Never fails on time.
#
# Knobs (environment): DETECT_N (training images, 2000), DETECT_SIZE (128), DETECT_EPOCHS (3),
# DETECT_B (global batch, 32), DETECT_EVERY (samples between validations, 1000), DETECT_TARGET (mAP@0.5 whose
# first crossing is timed, 0.1), DETECT_SCALE (0.5: multiplies every emulated speed so that 4 ranks fit 2 cores,
# as bench/hetero.sh explains), DETECT_KEEP=1 keeps the logs.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin/hetrain
PACK=build/bin/hetrain-pack
N=${DETECT_N:-2000}
SIZE=${DETECT_SIZE:-128}
EPOCHS=${DETECT_EPOCHS:-3}
B=${DETECT_B:-32}
EVERY=${DETECT_EVERY:-1000}
TARGET=${DETECT_TARGET:-0.1}
C=${DETECT_SCALE:-0.5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
TMP=$(mktemp -d /tmp/hetrain-bench-detect.XXXXXX)
if [ -n "${DETECT_KEEP:-}" ]; then echo "detect_hetero: logs kept in $TMP"; else trap 'rm -rf "$TMP"' EXIT; fi
for b in "$BIN" "$PACK"; do [ -x "$b" ] || { echo "detect_hetero: $b is not built — skipped"; exit 0; }; done
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] \
  || { echo "detect_hetero: dataset-fashion-mnist is not installed (make deps) — skipped"; exit 0; }

SPEEDS="1,1,0.5,0.25"
ES=$(awk -v c="$C" -v l="$SPEEDS" 'BEGIN { n = split(l, a, ","); for (i = 1; i <= n; i++) printf "%s%.6g", (i > 1 ? "," : ""), a[i] * c }')
echo "== detector on unlike ranks: yolov5n, 4 ranks with EMULATED speeds {$SPEEDS} x $C = {$ES}, $(getconf _NPROCESSORS_ONLN) cores"
"$PACK" detect-synthetic --split train --count "$N" --size "$SIZE" --seed 1 --no-progress -o "$TMP/train.h5" >/dev/null &&
  "$PACK" detect-synthetic --split test --count 300 --size "$SIZE" --seed 2 --no-progress -o "$TMP/test.h5" >/dev/null ||
  { echo "detect_hetero: generating the data failed — skipped"; exit 0; }
echo "   data: $N generated training images and 300 test images of ${SIZE}x${SIZE} (hetrain-pack detect-synthetic);"
echo "   $EPOCHS epochs, global batch $B, validation every $EVERY samples; lr 0.01, momentum 0.937, warm-up 1 epoch."

run() {  # name balance
  local out="$TMP/$1.log"
  if ! timeout 3600 mpirun --oversubscribe -n 4 "$BIN" train --model models/yolov5n.yaml --data "$TMP/train.h5" \
      --val "$TMP/test.h5" --global-batch "$B" --epochs "$EPOCHS" --lr 0.01 --momentum 0.937 --no-bn-decay \
      --warmup-epochs 1 --device cpu --val-every-samples "$EVERY" --log-every 0 --balance "$2" \
      --emulate-speed "$ES" >"$out" 2>&1; then
    echo "detect_hetero: the $1 run failed:"; tail -3 "$out"; return 1
  fi
}
run uniform none || exit 0
run dynamic dynamic || exit 0

# "validation at sample S (epoch E) after T s of training: loss L, mAP@0.5 X, mAP@0.5:0.95 Y (N samples)"
curve() { sed -n 's/^validation at sample \([0-9]*\) .* after \([0-9.]*\) s of training: .*mAP@0.5 \([0-9.]*\),.*/\1 \2 \3/p' "$1"; }
rate() { sed -n 's/^done: .* \([0-9.]*\) samples\/s.*/\1/p' "$1"; }
first_at() { curve "$1" | awk -v t="$TARGET" '$3 >= t { print $2; exit }'; }
echo
printf "%-9s %11s   %s\n" run samples/s "validations: samples -> mAP@0.5 (training seconds)"
for r in uniform dynamic; do
  printf "%-9s %11s   %s\n" "$r" "$(rate "$TMP/$r.log")" "$(curve "$TMP/$r.log" | awk '{ printf "%s->%.3f (%.0fs)  ", $1, $3, $2 }')"
done
u=$(rate "$TMP/uniform.log"); d=$(rate "$TMP/dynamic.log"); tu=$(first_at "$TMP/uniform.log"); td=$(first_at "$TMP/dynamic.log")
echo "   dynamic / uniform samples/s: $(awk -v a="$d" -v b="$u" 'BEGIN { printf "%.2fx", a / b }') (emulated ideal: 2.75x)"
echo "   time to mAP@0.5 >= $TARGET: uniform ${tu:-not reached} s, dynamic ${td:-not reached} s$(
  [ -n "$tu" ] && [ -n "$td" ] && awk -v a="$tu" -v b="$td" 'BEGIN { printf " (%.2fx faster)", a / b }')"
echo "   samples/s is the run's own figure (after its first step). Both runs train the same samples in the same"
echo "   order; a detector's loss averages over each rank's matches, so the two runs' models differ slightly (docs/detection.md)."
