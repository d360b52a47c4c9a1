#!/usr/bin/env bash
# bench/run.sh — hetrain's benchmarks (make bench). Each prints a side-by-side comparison measured in this
# one run; nothing here fails on time (exit 0 unless something crashes). Read ratios, not absolute numbers:
# the machine may be shared. See bench/README.md.
#
#   bench/run.sh [train] [reader] [hetero] [checkpoint] [modes] [overlap] [stragglers] [detect] [detect_hetero]
#                [balance_sim] [bn_modes] [detect_recipe] [jpeg] [compress] [peak] [powersgd]   default: all sixteen
set -uo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
BIN=build/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
CORES=$(getconf _NPROCESSORS_ONLN)
SECTIONS=${*:-train reader hetero checkpoint modes overlap stragglers detect detect_hetero balance_sim bn_modes detect_recipe jpeg compress peak powersgd}
TMP=$(mktemp -d /tmp/hetrain-bench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }
have_torch() { [ -x "$PY" ] && "$PY" -c 'import torch' 2>/dev/null; }
echo "hetrain benchmarks — $(date -u '+%Y-%m-%d %H:%M UTC'), $CORES cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------------------------------------ 1
train_step() {
  echo
  echo "== 1. training-step throughput (forward + softmax xent + backward + SGD momentum, random data, one process)"
  if [ ! -x "$BIN/bench_train_step" ]; then echo "   skipped: $BIN/bench_train_step is not built"; return; fi
  local torch=1
  have_torch || { torch=0; echo "   PyTorch: skipped (/usr/bin/python3 cannot import torch)"; }
  printf "%-9s %-10s %5s %7s  %12s %12s %7s  %11s %6s  %10s %10s\n" model input batch threads "hetrain s/s" \
    "PyTorch s/s" ratio "im2col s/s" "gain" "hetrain MB" "PyTorch MB"
  # model channels size batch warmup steps max-seconds
  local configs=("lenet 1 28 64 3 40 10" "resnet20 3 32 128 1 4 20" "resnet18 3 32 64 1 4 20" "resnet50 3 224 8 1 3 30")
  for cfg in "${configs[@]}"; do
    read -r model ch size batch warmup steps cap <<<"$cfg"
    for t in 1 2; do
      local args=(--model "$model" --channels "$ch" --size "$size" --batch "$batch" --threads "$t" --warmup "$warmup"
                  --steps "$steps" --max-seconds "$cap")
      local h p="" hr pr="-" pm="-" ratio="-" i ir="-" gain="-"
      h=$("$BIN/bench_train_step" "${args[@]}" 2>&1 | grep impl=) || { echo "   $model/$t threads: hetrain failed"; continue; }
      hr=$(field samples_per_s "$h")
      # The same step with the im2col + GEMM convolutions (the reference twin).
      if [ "$(field conv "$h")" = onednn ]; then
        i=$("$BIN/bench_train_step" "${args[@]}" --cpu-conv im2col 2>&1 | grep impl=) && ir=$(field samples_per_s "$i") &&
          gain=$(printf '%.2fx' "$(calc "$hr/$ir")")
      fi
      if [ $torch = 1 ]; then
        p=$("$PY" bench/pytorch_train_step.py "${args[@]}" 2>&1 | grep impl=)
        pr=$(field samples_per_s "$p"); pm=$(field peak_mb "$p")
        [ -n "$pr" ] && ratio=$(printf '%.2f' "$(calc "$hr/$pr")") || pr="failed"
      fi
      printf "%-9s %-10s %5s %7s  %12.2f %12s %6sx  %11s %6s  %10.0f %10s\n" "$model" "${ch}x${size}x${size}" "$batch" "$t" \
        "$hr" "$pr" "$ratio" "$ir" "$gain" "$(field peak_mb "$h")" "$pm"
    done
  done
  # Diagnostic: hetrain's OpenMP threads busy-wait between parallel regions while OpenBLAS's own threads run,
  # which costs a lot when cores are short; the same 2-thread runs with passive OpenMP waiting:
  for cfg in "${configs[@]:1}"; do
    read -r model ch size batch warmup steps cap <<<"$cfg"
    local h
    h=$(OMP_WAIT_POLICY=passive "$BIN/bench_train_step" --model "$model" --channels "$ch" --size "$size" --batch "$batch" \
        --threads 2 --warmup "$warmup" --steps "$steps" --max-seconds "$cap" 2>&1 | grep impl=) || continue
    printf "%-9s %-10s %5s %7s  %12.2f   (hetrain with OMP_WAIT_POLICY=passive)\n" "$model" "${ch}x${size}x${size}" "$batch" 2 \
      "$(field samples_per_s "$h")"
  done
  echo "   s/s = samples per second over the timed steps after untimed warm-up (a step that crosses the time cap"
  echo "   ends the timing early); ratio = hetrain / PyTorch (> 1: hetrain faster); MB = peak resident memory"
  echo "   (VmHWM) of that configuration's own process, runtime included (PyTorch's includes the Python runtime)."
  echo "   im2col s/s = hetrain with its im2col + GEMM convolutions (--cpu-conv im2col), gain = hetrain / im2col."
  echo "   CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); vector extensions:" \
    "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|avx512f|avx512_vnni|avx512_bf16|amx_tile)$' | tr '\n' ' ')"
  echo "   PyTorch: Debian's torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '-') (CPU, oneDNN), same architecture written in torch.nn."
}

# ------------------------------------------------------------------------------------------------ 2
reader() {
  echo
  echo "== 2. reader throughput (Dataset::read / Prefetcher) next to raw sequential reads of the same file"
  if [ ! -x "$BIN/bench_reader" ] || [ ! -x "$BIN/hetrain-pack" ]; then
    echo "   skipped: $BIN/bench_reader or $BIN/hetrain-pack is not built"; return
  fi
  local small="$TMP/small-28x28x1.h5" large="$TMP/large-224x224x3.h5"
  "$BIN/hetrain-pack" synthetic --count 100000 --channels 1 --size 28 -o "$small" --no-progress >/dev/null &&
    "$BIN/hetrain-pack" synthetic --count 2000 --channels 3 --size 224 -o "$large" --no-progress >/dev/null ||
    { echo "   skipped: hetrain-pack synthetic failed"; return; }
  printf "%-14s %5s %-10s %12s %10s %9s\n" file ranks mode "samples/s" "MB/s" "of raw"
  for spec in "$small:64" "$large:16"; do
    local f=${spec%:*} b=${spec##*:} raw
    cat "$f" >/dev/null  # into the page cache: raw and reader both read from memory
    raw=$(dd if="$f" of=/dev/null bs=4M 2>&1 | sed -n 's/.*copied, \([0-9.e+-]*\) s.*/\1/p')
    raw=$(calc "$(stat -c %s "$f") / 1e6 / $raw")
    local name; name=$(basename "$f" .h5 | sed 's/^[a-z]*-//')
    printf "%-14s %5s %-10s %12s %10.0f %9s\n" "$name" 1 "raw (dd)" "" "$raw" "100%"
    for n in 1 4; do
      mpirun --oversubscribe -n "$n" "$BIN/bench_reader" --data "$f" --batch "$b" --depth 4 \
          --modes sequential,random,prefetch,nodecache 2>&1 | grep mode= | while read -r line; do
        printf "%-14s %5s %-10s %12.0f %10.0f %8.1f%%\n" "$name" "$n" "$(field mode "$line")" \
          "$(field samples_per_s "$line")" "$(field mb_per_s "$line")" "$(calc "100*$(field mb_per_s "$line")/$raw")"
      done
    done
  done
  echo "   The files are in the page cache (read once before), so this compares hetrain's reader with reading"
  echo "   memory-cached bytes sequentially (dd bs=4M), not with a disk. MB/s counts image bytes (C·H·W per sample)."
  echo "   sequential: each rank its contiguous range in order; random: the training pattern (seeded permutation,"
  echo "   rank r's slice of every global batch; batch 64 per rank for 28x28, 16 for 224x224); prefetch: the same"
  echo "   through the Prefetcher (reader thread 4 batches ahead, uint8 → normalised float); nodecache: the same"
  echo "   from the per-node shared-memory copy (load not timed). 4 ranks run on $CORES cores (oversubscribed);"
  echo "   throughput is aggregate (all ranks' samples / slowest rank's time). Target (issue 3): reader ≥ 80% of"
  echo "   raw for 224x224."
  # Data wait while training from the packed 28x28 file (lenet: a small model, so the reader is most exposed).
  if [ -x "$BIN/hetrain" ]; then
    for n in 1 4; do
      local m="$TMP/wait-$n.jsonl"
      OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun --oversubscribe -n "$n" "$BIN/hetrain" train --data "$small" \
        --model lenet --global-batch 256 --max-steps 60 --balance none --quiet --log-every 0 --metrics "$m" \
        >"$m.log" 2>&1 || { echo "   data wait ($n ranks): hetrain train failed: $(tail -1 "$m.log")"; continue; }
      local s; s=$("$PY" bench/hetero_report.py steady "$m" 5)
      echo "   training lenet from the 28x28 file, $n rank(s), global batch 256: data wait $(calc "100*$(field wait_frac "$s")")%" \
        "of step time (slowest rank's wait; target < 2%), step $(field step_ms "$s") ms"
    done
  fi
}

# ------------------------------------------------------------------------------------------------ 4
checkpoint() {
  echo
  echo "== 4. checkpoint cost (write = in-memory HDF5 image + write + fsync + rename; load = read + verify CRC-32)"
  if [ ! -x "$BIN/bench_checkpoint" ]; then echo "   skipped: $BIN/bench_checkpoint is not built"; return; fi
  local dir="$TMP/ckpt"; mkdir -p "$dir"
  printf "%-9s %-9s %11s %9s %9s %9s   %s\n" model input "file MB" "write s" "load s" "dd s" "dd MB/s (same bytes, conv=fsync, same folder)"
  for cfg in "resnet20 32 10" "resnet50 224 1000"; do
    read -r model size classes <<<"$cfg"
    local h bytes dd_s
    h=$("$BIN/bench_checkpoint" --model "$model" --size "$size" --classes "$classes" --dir "$dir" --repeat 3 2>&1) \
      || { echo "   $model: bench_checkpoint failed: $h"; continue; }
    bytes=$(field file_bytes "$h")
    local t0; t0=$(date +%s.%N)
    dd if=/dev/zero of="$dir/dd.bin" bs=1M count=$(( (bytes + 1048575) / 1048576 )) conv=fsync status=none
    dd_s=$(calc "$(date +%s.%N) - $t0")
    rm -f "$dir/dd.bin"
    printf "%-9s %-9s %11.1f %9.3f %9.3f %9.3f   %.0f\n" "$model" "${size}x${size}" "$(calc "$bytes/1e6")" \
      "$(field write_s "$h")" "$(field load_s "$h")" "$dd_s" "$(calc "$bytes/1e6/($dd_s+1e-9)")"
    [ "$model" = resnet50 ] && last_write=$(field write_s "$h")
  done
  echo "   best of 3 (dd: one run). At the default --checkpoint-minutes 30, resnet50's write takes" \
    "$(printf '%.3f' "$(calc "100*${last_write:-0}/1800")")% of run time (target < 1%)."
}

# ------------------------------------------------------------------------------------------------ 8
# YOLOv5 detectors from the model files (models/*.yaml; DETECT_MODELS_DIR=dir reads them elsewhere), hetrain
# against the same file built in torch.nn by bench/yolov5_torch.py. Neither side computes YOLOv5's loss: the
# gradient of the head's rows is one fixed random tensor on both sides (see the notes printed below).
detect_step() {
  echo
  echo "== 8. detector training-step throughput (YOLOv5 at 320x320: forward + backward of a fixed gradient of the head's rows"
  echo "      + SGD momentum, random images, nc 10, one process)"
  if [ ! -x "$BIN/bench_train_step" ]; then echo "   skipped: $BIN/bench_train_step is not built"; return; fi
  local dir=${DETECT_MODELS_DIR:-models} torch=1
  have_torch && "$PY" -c 'import yaml' 2>/dev/null ||
    { torch=0; echo "   PyTorch: skipped ($PY cannot import torch and yaml)"; }
  printf "%-9s %-10s %5s %7s  %12s %12s %7s  %10s %10s  %s\n" model input batch threads "hetrain s/s" "PyTorch s/s" ratio \
    "hetrain MB" "PyTorch MB" params
  # model batch warmup steps max-seconds
  local configs=("yolov5s 8 1 4 15" "yolov5n 8 1 6 10")
  for cfg in "${configs[@]}"; do
    read -r model batch warmup steps cap <<<"$cfg"
    local file="$dir/$model.yaml"
    if [ ! -f "$file" ]; then echo "   $model: skipped ($file does not exist)"; continue; fi
    for t in 1 2; do
      local args=(--model "$file" --channels 3 --size 320 --classes 10 --batch "$batch" --threads "$t" --warmup "$warmup"
                  --steps "$steps" --max-seconds "$cap")
      local h p="" hr pr="-" pm="-" ratio="-" hp pp="" params
      h=$("$BIN/bench_train_step" "${args[@]}" 2>&1 | grep impl=) || { echo "   $model/$t threads: hetrain failed"; continue; }
      hr=$(field samples_per_s "$h"); hp=$(field params "$h"); params=$hp
      if [ $torch = 1 ]; then
        p=$("$PY" bench/yolov5_torch.py "${args[@]}" 2>&1 | grep impl=)
        pr=$(field samples_per_s "$p"); pm=$(field peak_mb "$p"); pp=$(field params "$p")
        [ -n "$pr" ] && ratio=$(printf '%.2f' "$(calc "$hr/$pr")") || pr="failed"
        [ -n "$pp" ] && [ "$pp" != "$hp" ] && params="$hp (PyTorch $pp: NOT the same model)"
      fi
      printf "%-9s %-10s %5s %7s  %12.2f %12s %6sx  %10.0f %10s  %s\n" "$model" "3x320x320" "$batch" "$t" "$hr" "$pr" \
        "$ratio" "$(field peak_mb "$h")" "$pm" "$params"
    done
  done
  echo "   s/s = images per second over the timed steps after untimed warm-up (a step that crosses the time cap ends"
  echo "   the timing early); ratio = hetrain / PyTorch (> 1: hetrain faster; target >= 1, as for the classifiers);"
  echo "   same thread count on both sides (hetrain::set_num_threads, torch.set_num_threads); MB = peak resident memory."
  echo "   Both sides read the same YAML file; PyTorch's network is bench/yolov5_torch.py's plain torch.nn YOLOv5 v6.0"
  echo "   (same layers and parameter count: the params column). The step has no YOLOv5 loss on either side: the"
  echo "   gradient of the head's rows [N, 6300, 15] is one fixed random tensor (objective sum(rows * G)), so the"
  echo "   comparison covers forward, backward and SGD of the network, not target assignment or the CIoU loss."
  echo "   PyTorch 1.13 itself sends stride-1 1x1 convolutions (most of C3's) to its im2col + BLAS path instead of oneDNN"
  echo "   when it has 1 thread and the batch is below 16 (its ConvParams::use_mkldnn rule); at 2 threads all run on oneDNN."
}

# ------------------------------------------------------------------------------------------------ 10
balance_sim() {
  echo
  echo "== 10. the balancer at scale: 8 to 4,096 virtual ranks through the real balancing code (docs/balance-sim.md)"
  if [ ! -x "$BIN/bench_balance_sim" ]; then echo "   skipped: $BIN/bench_balance_sim is not built"; return; fi
  local out=${BENCH_OUT:-build/bench}
  mkdir -p "$out"
  "$BIN/bench_balance_sim" --csv "$out/balance_sim.csv" || { echo "   bench_balance_sim failed"; return; }
  "$PY" bench/balance_sim_plot.py "$out/balance_sim.csv" "$out/balance_sim.png" 2>&1 | sed 's/^/   /' ||
    echo "   plot skipped: $PY cannot draw it (matplotlib)"
}

# ------------------------------------------------------------------------------------------------ 15
# The CPU step against the node's measured FP32 peak (docs/cpu-performance.md, "Against the machine's peak").
peak() {
  echo
  echo "== 15. the training step against the machine's measured FP32 peak"
  if [ ! -x "$BIN/bench_fma_peak" ] || [ ! -x "$BIN/bench_train_step" ]; then
    echo "   skipped: $BIN/bench_fma_peak or $BIN/bench_train_step is not built"; return
  fi
  local p peak1 peak2
  p=$("$BIN/bench_fma_peak" --threads 2) || { echo "   bench_fma_peak failed"; return; }
  sed 's/^/   /' <<<"$p"
  peak1=$(grep -E "^isa=$(field isa "$(grep '^peak' <<<"$p")") threads=1 " <<<"$p" | sed -n 's/.*gflops=\([^ ]*\).*/\1/p')
  peak2=$(grep -E "^isa=$(field isa "$(grep '^peak' <<<"$p")") threads=2 " <<<"$p" | sed -n 's/.*gflops=\([^ ]*\).*/\1/p')
  printf "%-9s %-10s %5s %7s  %12s %10s %10s %9s\n" model input batch threads "samples/s" "GFLOP/step" "GFLOP/s" "of peak"
  local configs=("lenet 1 28 64 3 40 10" "resnet20 3 32 128 1 4 20" "resnet18 3 32 64 1 4 20" "resnet50 3 224 8 1 3 30")
  for cfg in "${configs[@]}"; do
    read -r model ch size batch warmup steps cap <<<"$cfg"
    for t in 1 2; do
      local h pk
      h=$("$BIN/bench_train_step" --model "$model" --channels "$ch" --size "$size" --batch "$batch" --threads "$t" \
          --warmup "$warmup" --steps "$steps" --max-seconds "$cap" 2>&1 | grep impl=) || { echo "   $model/$t: failed"; continue; }
      pk=$([ "$t" = 1 ] && echo "$peak1" || echo "$peak2")
      printf "%-9s %-10s %5s %7s  %12.2f %10.3f %10.1f %8.1f%%\n" "$model" "${ch}x${size}x${size}" "$batch" "$t" \
        "$(field samples_per_s "$h")" "$(field gflop_per_step "$h")" "$(field gflops "$h")" \
        "$(calc "100*$(field gflops "$h")/${pk:-0}")"
    done
  done
  echo "   GFLOP/step = the convolutions' and dense layers' multiply-adds x 2 of one step, forward and backward"
  echo "   (counted from the shapes the ops see; batch norm, activations, pooling, loss and SGD count as none);"
  echo "   GFLOP/s = that x steps/s of the timed steps; of peak = against the same thread count's FMA peak above."
  echo "   Where resnet50 224^2 b8's step goes at 2 threads (one profiled step; totals, then the 12 costliest layer shapes):"
  "$BIN/bench_train_step" --model resnet50 --size 224 --batch 8 --threads 2 --warmup 1 --steps 2 --max-seconds 30 \
      --profile 1 2>&1 | grep '^profile' | "$PY" -c '
import sys
rows = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in sys.stdin]
step = next(float(r["ms"]) for r in rows if r["what"] == "step")
def total(label, pick):
    ms = sum(float(r["ms"]) for r in rows if pick(r["what"]))
    print("   %-58s %9.1f ms %6.1f%%" % (label, ms, 100 * ms / step))
print("   %-58s %9.1f ms" % ("the step", step))
total("convolutions, forward", lambda w: w.startswith("conv") and w.endswith("forward"))
total("convolutions, backward (input and weight gradients)", lambda w: w.startswith("conv") and w.endswith("backward"))
total("dense layers", lambda w: w.startswith("linear"))
total("batch norm, forward and backward", lambda w: w.startswith("batchnorm"))
total("element-wise (ReLU, residual adds)", lambda w: w.startswith(("relu", "silu", "sigmoid", "add", "accumulate")))
total("pooling", lambda w: "pool" in w)
total("SGD update", lambda w: w == "sgd_update")
total("the rest (loss, copies, layer bookkeeping)", lambda w: w.startswith("the_rest"))
layers = sorted((r for r in rows if r["what"].startswith(("conv", "linear"))), key=lambda r: -float(r["ms"]))
for r in layers[:12]:
    print("   %-58s %5s calls %9.1f ms %6.1f%% %8.1f GFLOP/s" % (r["what"].replace("_", " "), r["calls"], float(r["ms"]),
          100 * float(r["share"]), float(r["gflops"])))'
}

# ------------------------------------------------------------------------------------------------
for s in $SECTIONS; do
  case $s in
    train) train_step ;;
    reader) reader ;;
    hetero) echo; echo "== 3. heterogeneous balancing (bench/hetero.sh)"; bench/hetero.sh ;;
    checkpoint) checkpoint ;;
    modes) echo; bench/modes.sh ;;
    overlap) echo; bench/overlap.sh ;;
    stragglers) echo; bench/stragglers.sh ;;
    detect) detect_step ;;
    detect_hetero) echo; echo "== 9. a detector on unlike ranks (bench/detect_hetero.sh)"; bench/detect_hetero.sh ;;
    balance_sim) balance_sim ;;
    bn_modes) echo; bench/bn_modes.sh ;;
    detect_recipe) echo; bench/detect_recipe.sh ;;
    jpeg) echo; bench/jpeg_data.sh ;;
    compress) echo; echo "== 14. compressed gradient exchange on slow links (bench/compress.sh)"; bench/compress.sh ;;
    peak) peak ;;
    powersgd) echo; echo "== 16. PowerSGD's training against the exact reduction and PyTorch's hook (bench/powersgd_training.sh)"
              bench/powersgd_training.sh ;;
    *) echo "bench/run.sh: unknown section '$s' (train, reader, hetero, checkpoint, modes, overlap, stragglers, detect, detect_hetero, balance_sim, bn_modes, detect_recipe, jpeg, compress, peak, powersgd)" >&2; exit 2 ;;
  esac
done
exit 0
