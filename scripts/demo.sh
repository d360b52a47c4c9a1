#!/usr/bin/env bash
# The demo: pack Fashion-MNIST (Debian's dataset-fashion-mnist) into hetrain's HDF5 format, then train
# lenet on 4 MPI ranks whose relative speeds are EMULATED as 1 : 1 : 0.5 : 0.25 (ranks sleep; this machine
# has equal cores), with dynamic load balancing; finally measure the uniform split (the DDP baseline) on
# the same job for a few hundred steps and print both throughputs side by side. The trained model's
# checkpoint is evaluated again with `hetrain eval`.
#
# Why 1/8 of a core: an emulated rank of speed s computes for s of each step and sleeps the rest, so the 4
# ranks keep Σs cores busy. At full speed that is 2.75 cores on a 2-core machine: the cores, not the
# emulated devices, would set the pace, and the demo would measure core sharing instead of balancing. At
# 1/8 the ranks keep about a third of a core busy and behave like 4 separate devices of those speeds
# (docs/architecture.md, "Emulated heterogeneity").
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
OUT=${DEMO_OUT:-demo-out}
RANKS=${DEMO_RANKS:-4}
EPOCHS=${DEMO_EPOCHS:-3}
SPEEDS=${DEMO_SPEEDS:-0.125,0.125,0.0625,0.03125}  # relative 1 : 1 : 0.5 : 0.25
mkdir -p "$OUT"

for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
  [ -f "$SRC/$f" ] || { echo "demo: $SRC/$f is missing — run 'make deps' (installs dataset-fashion-mnist)" >&2; exit 1; }
done

if [ ! -f "$OUT/train.h5" ]; then
  echo "== packing Fashion-MNIST into $OUT/train.h5 and $OUT/test.h5"
  build/bin/hetrain-pack idx --images "$SRC/train-images-idx3-ubyte.gz" --labels "$SRC/train-labels-idx1-ubyte.gz" -o "$OUT/train.h5"
  build/bin/hetrain-pack idx --images "$SRC/t10k-images-idx3-ubyte.gz" --labels "$SRC/t10k-labels-idx1-ubyte.gz" -o "$OUT/test.h5"
fi
build/bin/hetrain-pack inspect "$OUT/train.h5" | head -n 12

# OpenMPI as root on a small machine: allow root, allow more ranks than cores, one BLAS thread per rank.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
# Ranks waiting in a collective yield the core instead of spinning (ranks may outnumber cores here).
export OMPI_MCA_mpi_yield_when_idle=1
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

COMMON=(--data "$OUT/train.h5" --model lenet --global-batch 256 --lr 0.05 --warmup-epochs 0.2 --threads 1
        --emulate-speed "$SPEEDS" --prefetch 2)

echo
echo "== training lenet on $RANKS ranks, emulated speeds $SPEEDS (relative 1 : 1 : 0.5 : 0.25 at 1/8 of a core)," \
     "dynamic balancing, $EPOCHS epochs"
mpirun -n "$RANKS" build/bin/hetrain train "${COMMON[@]}" --val "$OUT/test.h5" --epochs "$EPOCHS" \
  --balance dynamic --rebalance-every 20 --log-every 50 --metrics "$OUT/dynamic.jsonl" \
  --checkpoint-dir "$OUT/checkpoints" | tee "$OUT/dynamic.log"

echo
echo "== the trained model from its checkpoint, evaluated on the test set by 2 ranks (hetrain eval)"
ckpt=$(ls "$OUT"/checkpoints/checkpoint-*.h5 | tail -1)
mpirun -n 2 build/bin/hetrain eval --checkpoint "$ckpt" --data "$OUT/test.h5"

echo
echo "== the same job with the uniform split (--balance none, the DDP/Horovod baseline), 120 steps"
mpirun -n "$RANKS" build/bin/hetrain train "${COMMON[@]}" --balance none --max-steps 120 --log-every 40 \
  --metrics "$OUT/uniform.jsonl" | tee "$OUT/uniform.log"

# Steady-state throughput: median samples/s over steps after the first 30 (calibration, warm-up).
rate() { /usr/bin/python3 - "$1" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
steady = [r["step_s"] for r in rows if r["step"] >= 30] or [r["step_s"] for r in rows]
b = rows[-1]["b"]
print("%.1f" % (sum(b) / statistics.median(steady)))
PY
}
dyn=$(rate "$OUT/dynamic.jsonl")
uni=$(rate "$OUT/uniform.jsonl")
acc=$(grep -o 'accuracy [0-9.]*%' "$OUT/dynamic.log" | tail -1)
steps=$(wc -l < "$OUT/dynamic.jsonl")
moves=$(grep -c '^rebalance: .*after step' "$OUT/dynamic.log" || true)
echo
echo "== result: test $acc after $EPOCHS epochs; throughput dynamic $dyn samples/s vs uniform $uni samples/s" \
     "($(/usr/bin/python3 -c "print('%.2fx' % ($dyn / $uni))"); ideal 2.75x) — speeds are emulated, not real hardware"
echo "   the split changed $moves times in $steps steps (2 of them calibration)"

echo
echo "== report: the per-rank split, times, efficiency and accuracy of both runs (hetrain report)"
build/bin/hetrain report "$OUT/dynamic.jsonl" "$OUT/uniform.jsonl" -o "$OUT/report.html"
build/bin/hetrain report "$OUT/dynamic.jsonl" -o "$OUT/report.png"
echo "report: $OUT/report.html (both runs) and $OUT/report.png (the dynamic run)"
