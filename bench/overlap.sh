#!/usr/bin/env bash
# bench/overlap.sh — gradient reduction over a network: buckets overlapped with backward (--bucket-mb 0
# against the default 25) and the hierarchical reduction (--hierarchical off against on), side by side in
# one run (docs/architecture.md, "Gradient reduction"). Prints; never fails on time.
#
# Two "nodes" on this machine (scripts/netns-nodes.sh: network namespaces with their own host names and
# addresses, links shaped with tc in both directions; shared memory inside a node, TCP between them). 2 nodes x 2 ranks,
# synthetic 3x32x32 data, global batch 64, uniform split. All four ranks share this machine's cores, so a
# step computes slower than on real nodes (which leaves more backward to hide a reduction behind).
#
# Needs root, iproute2 (ip, tc) and unshare; otherwise prints why and skips. Knobs (environment):
# OVERLAP_RATES ("1gbit 10gbit"), OVERLAP_MODELS ("resnet18 resnet50"), OVERLAP_STEPS (6; the first is
# not counted), OVERLAP_KEEP=1 keeps the metrics and logs.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$PWD/build/bin/hetrain
PY=/usr/bin/python3
RATES=${OVERLAP_RATES:-1gbit 10gbit}
MODELS=${OVERLAP_MODELS:-resnet18 resnet50}
STEPS=${OVERLAP_STEPS:-6}
NS=htov      # namespaces htov1, htov2 (nodes) and htovbr (the switch)
NET=10.79.0  # the nodes' addresses, only inside those namespaces
say_skip() { echo "overlap: skipped: $*"; exit 0; }
source scripts/netns-nodes.sh
netns_bench_begin overlap OVERLAP_KEEP "$BIN"

# ---------------------------------------------------------------- runs
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
run() {  # model rate bucket-mb hierarchical
  local out="$TMP/$1-$2-b$3-$4"
  local before1 before2
  before1=$(netns_link_bytes 1); before2=$(netns_link_bytes 2)
  if ! netns_mpirun -n 4 "$BIN" train --model "$1" --synthetic $((64 * STEPS)) --synthetic-shape 3,32,32 \
      --global-batch 64 --max-steps "$STEPS" --balance none --bucket-mb "$3" --hierarchical "$4" --log-every 0 \
      --metrics "$out.jsonl" >"$out.log" 2>&1; then
    printf "%-9s %-7s %6s %-6s  failed: %s\n" "$1" "$2" "$3" "$4" "$(grep -m1 -i error "$out.log" || tail -1 "$out.log")"
    return
  fi
  local mb1 mb2 r
  mb1=$(( ($(netns_link_bytes 1) - before1) / STEPS / 1000000 )); mb2=$(( ($(netns_link_bytes 2) - before2) / STEPS / 1000000 ))
  r=$($PY bench/overlap_report.py "$out.jsonl" 1)
  printf "%-9s %-7s %6s %-6s %8.3f %9.3f %9.3f %8.1f%% %11s\n" "$1" "$2" "$3" "$4" "$(field step_s "$r")" \
    "$(field compute_s "$r")" "$(field exposed_s "$r")" "$(awk "BEGIN{print 100*$(field exposed_frac "$r")}")" "$mb1/$mb2"
}

echo "== gradient reduction over a network: 2 nodes x 2 ranks (network namespaces, tbf-shaped links), $(getconf _NPROCESSORS_ONLN) cores"
if ! netns_mpirun -n 4 hostname >"$TMP/hosts.out" 2>&1 || [ "$(sort -u "$TMP/hosts.out" | wc -l)" -ne 2 ]; then
  say_skip "mpirun across the namespaces did not reach two hosts: $(tail -1 "$TMP/hosts.out")"
fi
printf "%-9s %-7s %6s %-6s %8s %9s %9s %9s %11s\n" model link bucket hier "step s" "compute s" "exposed s" exposed \
  "MB/step n1/n2"
for rate in $RATES; do
  netns_set_rate "$rate" || { echo "overlap: could not set the links to $rate"; continue; }
  for model in $MODELS; do
    for hier in off on; do
      for mb in 0 25; do run "$model" "$rate" "$mb" "$hier"; done
    done
  done
done
echo "   bucket = --bucket-mb (0: one allreduce after backward; 25: buckets started during backward); hier ="
echo "   --hierarchical (off: one allreduce over the 4 ranks; on: reduce inside the node, allreduce between the"
echo "   2 node leaders, broadcast inside the node). Steps 2..$STEPS: step s = mean step time; compute s = the"
echo "   slowest rank's forward + backward; exposed s = the reduction time not hidden behind backward (the rank"
echo "   that waited longest after the agreement), and its share of the step (target: <= 10% where the link"
echo "   carries the gradient within the backward time). MB/step = bytes through each node's link (both"
echo "   directions, launch included) / steps. Four ranks share this machine's cores: the backward that a"
echo "   reduction can hide behind is that of an oversubscribed machine, not of real nodes."
