#!/usr/bin/env bash
# bench/compress.sh — gradient exchange on slow links: the whole FP32 gradient in buckets (the default),
# 16 bits on the wire (--reduce-precision bf16) and PowerSGD (--compress powersgd:4), side by side in one
# run on the same shaped links (docs/architecture.md, "16-bit transport" and "PowerSGD"). Prints; never
# fails on time.
#
#  1. resnet18 and resnet50 (synthetic 3x32x32, global batch 64, uniform split) at 1 and 10 Gbit/s:
#     step time, compute, exposed communication and its share, samples/s, and the bytes each node's link
#     carried per step, read from the link's own counters (not computed from the message sizes).
#  3. (printed before 2) The asynchronous modes' center trades, fp32 against --reduce-precision bf16 (--mode
#     async, osc/pt2pt, COMPRESS_ASYNC_MODEL resnet18, COMPRESS_ASYNC_SAMPLES 1024, COMPRESS_ASYNC_RATES 1gbit):
#     samples/s, center updates, read/push times and the link's bytes per center update.
#  2. Time to accuracy: resnet20 on Fashion-MNIST (Debian's dataset-fashion-mnist, packed here) at 1 Gbit/s,
#     the three exchanges from the same seed: val accuracy after COMPRESS_EPOCHS epochs, the training time
#     to reach COMPRESS_TARGET val accuracy, and the difference to the exact (FP32) run.
#
# Two "nodes" on this machine (scripts/netns-nodes.sh: network namespaces, links shaped with tc), 2 nodes x
# 2 ranks sharing this machine's cores. Needs root, iproute2 and unshare; otherwise prints why and skips.
# Knobs (environment): COMPRESS_RATES ("1gbit 10gbit"), COMPRESS_MODELS ("resnet18 resnet50"),
# COMPRESS_STEPS (6; the first is not counted), COMPRESS_EPOCHS (2), COMPRESS_TARGET (0.85),
# COMPRESS_SEEDS ("1": part 2 once per seed), COMPRESS_PARTS ("throughput async tta"), COMPRESS_KEEP=1 keeps the
# metrics and logs.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/build/bin
PY=/usr/bin/python3
RATES=${COMPRESS_RATES:-1gbit 10gbit}
MODELS=${COMPRESS_MODELS:-resnet18 resnet50}
STEPS=${COMPRESS_STEPS:-6}
EPOCHS=${COMPRESS_EPOCHS:-2}
TARGET=${COMPRESS_TARGET:-0.85}
SEEDS=${COMPRESS_SEEDS:-1}
PARTS=${COMPRESS_PARTS:-throughput async tta}
ASYNC_MODEL=${COMPRESS_ASYNC_MODEL:-resnet18}
ASYNC_SAMPLES=${COMPRESS_ASYNC_SAMPLES:-1024}
ASYNC_RATES=${COMPRESS_ASYNC_RATES:-1gbit}
NS=htcp      # namespaces htcp1, htcp2 (nodes) and htcpbr (the switch)
NET=10.78.0  # the nodes' addresses, only inside those namespaces
say_skip() { echo "compress: skipped: $*"; exit 0; }
source scripts/netns-nodes.sh
netns_bench_begin compress COMPRESS_KEEP "$BIN/hetrain"

EXCHANGES=("fp32" "bf16 --reduce-precision bf16" "powersgd:4 --compress powersgd:4")
# The same two through node leaders: the whole-gradient exchanges once more with --hierarchical on.
HIER=("fp32,hier --hierarchical on" "bf16,hier --reduce-precision bf16 --hierarchical on")
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }

# ---------------------------------------------------------------- 1. throughput
step_run() {  # model rate name [options...]
  local model=$1 rate=$2 name=$3; shift 3
  local out="$TMP/$model-$rate-${name//[:,]/}" before1 before2
  before1=$(netns_link_bytes 1); before2=$(netns_link_bytes 2)
  if ! netns_mpirun -n 4 "$BIN/hetrain" train --model "$model" --synthetic $((64 * STEPS)) --synthetic-shape 3,32,32 \
      --global-batch 64 --max-steps "$STEPS" --balance none --log-every 0 --metrics "$out.jsonl" "$@" >"$out.log" 2>&1; then
    printf "%-9s %-7s %-11s  failed: %s\n" "$model" "$rate" "$name" "$(grep -m1 -i error "$out.log" || tail -1 "$out.log")"
    return
  fi
  local mb1 mb2 r
  mb1=$(awk "BEGIN{printf \"%.1f\", ($(netns_link_bytes 1) - $before1) / $STEPS / 1e6}")
  mb2=$(awk "BEGIN{printf \"%.1f\", ($(netns_link_bytes 2) - $before2) / $STEPS / 1e6}")
  r=$($PY bench/compress_report.py "$out.jsonl" 1)
  printf "%-9s %-7s %-11s %8.3f %9.3f %9.3f %8.1f%% %10.1f %13s\n" "$model" "$rate" "$name" "$(field step_s "$r")" \
    "$(field compute_s "$r")" "$(field exposed_s "$r")" "$(awk "BEGIN{print 100*$(field exposed_frac "$r")}")" \
    "$(field samples_per_s "$r")" "$mb1/$mb2"
}

echo "== gradient exchange on slow links: 2 nodes x 2 ranks (network namespaces, tbf-shaped links), $(getconf _NPROCESSORS_ONLN) cores"
if ! netns_mpirun -n 4 hostname >"$TMP/hosts.out" 2>&1 || [ "$(sort -u "$TMP/hosts.out" | wc -l)" -ne 2 ]; then
  say_skip "mpirun across the namespaces did not reach two hosts: $(tail -1 "$TMP/hosts.out")"
fi
if [[ " $PARTS " == *" throughput "* ]]; then
printf "%-9s %-7s %-11s %8s %9s %9s %9s %10s %13s\n" model link exchange "step s" "compute s" "exposed s" exposed \
  "samples/s" "MB/step n1/n2"
for rate in $RATES; do
  netns_set_rate "$rate" || { echo "compress: could not set the links to $rate"; continue; }
  for model in $MODELS; do
    for x in "${EXCHANGES[@]}" "${HIER[@]}"; do
      read -r -a opts <<<"$x"
      step_run "$model" "$rate" "${opts[@]}"
    done
  done
done
echo "   exchange: fp32 = the whole gradient in buckets of 25 MiB started during backward (the default); bf16 ="
echo "   the same buckets with 16 bits on the wire; powersgd:4 = rank-4 factors with error feedback, in the same"
echo "   buckets during backward (each bucket's P's as its gradients are final, its Q's as its P's come back);"
echo "   ,hier = through the node leaders (--hierarchical on): a reduce inside the node, the exchange between the"
echo "   2 leaders, a broadcast. Flat, FP32's ring crosses the node boundary on 2 of its 4 edges while the 16-bit"
echo "   all-to-all reaches both ranks of the other node, so bf16 moves 2/3 of FP32's bytes there; between the"
echo "   leaders (one rank per node, as on most clusters) both exchanges are the ring's bytes and bf16 moves half."
echo "   Steps 2..$STEPS: step s = mean step time; compute s = the slowest rank's forward + backward; exposed s ="
echo "   the exchange time not hidden behind backward (PowerSGD's products included) and its share of the step"
echo "   (goal at 1 Gbit/s, resnet18 and resnet50, powersgd:4: <= 10%); MB/step = bytes through each node's link (both"
echo "   directions, from the link's counters; launch and set-up included) / steps. Four ranks share this"
echo "   machine's cores, so a step computes slower than on real nodes."
fi

# ---------------------------------------------------------------- 3. the asynchronous modes' center trades
# (before part 2, which ends the script early where Fashion-MNIST is missing)
if [[ " $PARTS " == *" async "* ]]; then
echo
echo "== center trades of --mode async on slow links: 2 nodes x 2 ranks, osc/pt2pt, $ASYNC_MODEL 32x32, $ASYNC_SAMPLES samples"
printf "%-7s %-7s %10s %9s %11s %11s %15s\n" link wire samples/s updates "median ms" "slowest ms" "MB/update n1/n2"
for rate in $ASYNC_RATES; do
  netns_set_rate "$rate" || { echo "compress: could not set the links to $rate"; continue; }
  for wire in fp32 bf16; do
    out="$TMP/async-$rate-$wire"
    before1=$(netns_link_bytes 1); before2=$(netns_link_bytes 2)
    if ! netns_mpirun -n 4 --mca osc pt2pt "$BIN/hetrain" train --model "$ASYNC_MODEL" --synthetic "$ASYNC_SAMPLES" \
        --synthetic-shape 3,32,32 --global-batch 64 --epochs 1 --lr 0.05 --mode async --reduce-precision $wire \
        --log-every 0 >"$out.log" 2>&1; then
      printf "%-7s %-7s  failed: %s\n" "$rate" "$wire" "$(grep -m1 -i error "$out.log" || tail -1 "$out.log")"
      continue
    fi
    done_line=$(grep '^done:' "$out.log")
    updates=$(sed -n 's/.* \([0-9]*\) center updates.*/\1/p' <<<"$done_line")
    printf "%-7s %-7s %10s %9s %11s %11s %15s\n" "$rate" "$wire" "$(sed -n 's/.*, \([0-9.]*\) samples\/s.*/\1/p' <<<"$done_line")" \
      "$updates" "$(sed -n 's/.*read or push median \([0-9.]*\) ms.*/\1/p' <<<"$done_line")" \
      "$(sed -n 's/.*slowest \([0-9.]*\) ms.*/\1/p' <<<"$done_line")" \
      "$(awk "BEGIN{printf \"%.2f/%.2f\", ($(netns_link_bytes 1) - $before1) / $updates / 1e6, ($(netns_link_bytes 2) - $before2) / $updates / 1e6}")"
  done
done
echo "   Each rank trains local batches of 16 and trades with the sharded center after each: reads its three"
echo "   other shards and pushes into them. bf16 = --reduce-precision bf16: reads from the owners' 16-bit copies,"
echo "   pushes through their inboxes (docs/architecture.md, \"16-bit center trades\"). MB/update = bytes through"
echo "   each node's link (both directions, the link's counters; launch, set-up and the counter's traffic"
echo "   included) / center updates; median/slowest = one center read or push."
fi

# ---------------------------------------------------------------- 2. time to accuracy
[[ " $PARTS " == *" tta "* ]] || exit 0
echo
echo "== time to accuracy: resnet20 on Fashion-MNIST, 2 nodes x 2 ranks at 1 Gbit/s, $EPOCHS epoch(s), global batch 128"
SRC=/usr/share/datasets/fashion-mnist
[ -f "$SRC/train-images-idx3-ubyte.gz" ] || { echo "   skipped: $SRC is missing (Debian's dataset-fashion-mnist)"; exit 0; }
"$BIN/hetrain-pack" idx --images "$SRC/train-images-idx3-ubyte.gz" --labels "$SRC/train-labels-idx1-ubyte.gz" \
  -o "$TMP/train.h5" >"$TMP/pack.log" 2>&1 &&
  "$BIN/hetrain-pack" idx --images "$SRC/t10k-images-idx3-ubyte.gz" --labels "$SRC/t10k-labels-idx1-ubyte.gz" \
  -o "$TMP/test.h5" >>"$TMP/pack.log" 2>&1 || { echo "   skipped: packing failed: $(tail -1 "$TMP/pack.log")"; exit 0; }
netns_set_rate 1gbit || { echo "   skipped: could not set the links to 1gbit"; exit 0; }
printf "%-11s %4s %9s %9s %10s %12s %10s %9s\n" exchange seed "val acc" "vs exact" "train s" "to $TARGET s" "samples/s" exposed
for seed in $SEEDS; do
exact=""
for x in "${EXCHANGES[@]}"; do
  read -r -a opts <<<"$x"
  name=${opts[0]}
  out="$TMP/tta-${name//:/}-$seed"
  # PowerSGD starts after a warm-up of about a tenth of the run, as its authors advise.
  warm=()
  [ "$name" = "powersgd:4" ] && warm=(--compress-start $((60000 / 128 * EPOCHS / 10)))
  if ! netns_mpirun -n 4 "$BIN/hetrain" train --model resnet20 --data "$TMP/train.h5" --val "$TMP/test.h5" \
      --global-batch 128 --epochs "$EPOCHS" --lr 0.1 --momentum 0.9 --weight-decay 5e-4 --warmup-epochs 0.2 --augment \
      --balance none --seed "$seed" --log-every 0 --val-every-samples 15000 --metrics "$out.jsonl" "${opts[@]:1}" "${warm[@]}" \
      >"$out.log" 2>&1; then
    printf "%-11s %4s  failed: %s\n" "$name" "$seed" "$(grep -m1 -i error "$out.log" || tail -1 "$out.log")"
    continue
  fi
  r=$($PY bench/compress_report.py "$out.jsonl" 1 "$TARGET")
  acc=$(field val_acc "$r")
  [ -z "$exact" ] && exact=$acc
  printf "%-11s %4s %8.2f%% %+8.2f %10s %12s %10s %8.1f%%\n" "$name" "$seed" "$(awk "BEGIN{print 100*$acc}")" \
    "$(awk "BEGIN{print 100*($acc-$exact)}")" "$(field train_s "$r")" "$(field tta_s "$r")" "$(field samples_per_s "$r")" \
    "$(awk "BEGIN{print 100*$(field exposed_frac "$r")}")"
done
done
echo "   val acc = accuracy on the 10,000 test images after the last epoch; vs exact = points against fp32 (goal"
echo "   for powersgd:4: within 0.5); train s = summed step times (validation excluded); to $TARGET s = training"
echo "   time until val accuracy (measured every 15,000 samples) first reached $TARGET ('-': never). One run"
echo "   per exchange and seed (COMPRESS_SEEDS); the runs are deterministic, so the seeds give the spread."
echo "   powersgd:4 warms up whole for a tenth of the run."
