#!/usr/bin/env bash
# bench/modes.sh — time to accuracy of the training modes (make bench, section 5).
#
# Real data (Fashion-MNIST from dataset-fashion-mnist), lenet, 4 ranks, global batch 256, 3 epochs. Modes:
# sync with the uniform split (--balance none: the DDP baseline), sync dynamic, async, and hybrid with
# groups {0,1},{2,3}. Scenarios, all EMULATED with sleeps (not real hardware):
#   (a) steady unequal speeds {1, 1, 0.5, 0.25};
#   (b) equal speeds with transient stragglers: every 40 steps a random rank runs 4x slower for 20 steps.
# Every run validates the model (in async/hybrid: the center) on the 10,000 test images every
# MODES_VAL_EVERY training samples; the clock of each validation line leaves validation out, in every mode
# alike. Printed per scenario and mode (median over the seeds): the wall time to the target accuracy, the
# epochs to it, the accuracy at the wall time the fastest mode needed in all, and samples/s. A PNG plots
# accuracy against wall time. Prints; never fails on time.
#
# Knobs (environment): MODES_SEEDS (3), MODES_EPOCHS (3), MODES_TARGET (85, test accuracy in %),
# MODES_VAL_EVERY (10000), MODES_OUT (folder for the logs and modes.png; default a temporary folder, removed).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin/hetrain
PACK=build/bin/hetrain-pack
PY=/usr/bin/python3
SEEDS=${MODES_SEEDS:-3}
EPOCHS=${MODES_EPOCHS:-3}
TARGET=${MODES_TARGET:-85}
VAL_EVERY=${MODES_VAL_EVERY:-10000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
export OMPI_MCA_rmaps_base_oversubscribe=1  # 4 ranks on fewer cores
SRC=/usr/share/datasets/fashion-mnist
if [ ! -x "$BIN" ] || [ ! -x "$PACK" ]; then echo "modes: $BIN is not built — skipped"; exit 0; fi
if [ ! -f $SRC/train-images-idx3-ubyte.gz ]; then echo "modes: dataset-fashion-mnist is not installed (make deps) — skipped"; exit 0; fi
if [ -n "${MODES_OUT:-}" ]; then OUT=$MODES_OUT; mkdir -p "$OUT"; else OUT=$(mktemp -d /tmp/hetrain-bench-modes.XXXXXX); trap 'rm -rf "$OUT"' EXIT; fi

$PACK idx --images $SRC/train-images-idx3-ubyte.gz --labels $SRC/train-labels-idx1-ubyte.gz -o "$OUT/train.h5" --no-progress >/dev/null || exit 0
$PACK idx --images $SRC/t10k-images-idx3-ubyte.gz --labels $SRC/t10k-labels-idx1-ubyte.gz -o "$OUT/test.h5" --no-progress >/dev/null || exit 0

# (b)'s stragglers: a seeded random rank at 0.25 for 20 steps out of every 40, for the whole run.
stragglers() {
  "$PY" - "$1" "$2" <<'PY'
import random, sys
rng, steps = random.Random(int(sys.argv[1])), int(sys.argv[2])
items = []
for start in range(10, steps, 40):
    r = rng.randrange(4)
    items += ["%d:%d:0.25" % (start, r), "%d:%d:1" % (start + 20, r)]
print(",".join(items))
PY
}
STEPS=$((60000 / 256 * EPOCHS))
echo "== 5. training modes: time to ${TARGET}% test accuracy, lenet on Fashion-MNIST, 4 ranks, B=256, $EPOCHS epochs, $SEEDS seed(s)"
echo "   EMULATED heterogeneity (sleeps, not real hardware); validation time is left out of every clock"
for scenario in a b; do
  for seed in $(seq "$SEEDS"); do
    if [ $scenario = a ]; then emulate=(--emulate-speed 1,1,0.5,0.25); else emulate=(--emulate-schedule "$(stragglers "$seed" "$STEPS")"); fi
    for mode in uniform dynamic async hybrid; do
      case $mode in
        uniform) args=(--mode sync --balance none) ;;
        dynamic) args=(--mode sync --balance dynamic) ;;
        async) args=(--mode async) ;;
        hybrid) args=(--mode hybrid --groups 0,0,1,1) ;;
      esac
      log="$OUT/$scenario-$mode-$seed.log"
      timeout 900 mpirun -n 4 "$BIN" train --data "$OUT/train.h5" --val "$OUT/test.h5" --model lenet --global-batch 256 \
        --epochs "$EPOCHS" --lr 0.05 --warmup-epochs 0.1 --seed "$seed" --log-every 100000 \
        --val-every-samples "$VAL_EVERY" "${args[@]}" "${emulate[@]}" >"$log" 2>&1 \
        || echo "   $scenario/$mode/seed $seed: the run failed (see $log)"
    done
  done
done
"$PY" bench/modes_report.py "$OUT" "$TARGET" "$SEEDS" "$OUT/modes.png"
[ -n "${MODES_OUT:-}" ] && echo "   logs and modes.png in $OUT"
exit 0
