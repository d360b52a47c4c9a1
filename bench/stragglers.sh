#!/usr/bin/env bash
# bench/stragglers.sh — how much of the hardware's rate synchronous balancing keeps when stragglers come
# and go (the balancer's early refit, docs/architecture.md "Balancing").
#
# 2 ranks of equal EMULATED speed train lenet on in-memory synthetic 1×28×28 data, global batch 256. Every
# 40 steps one rank (alternating) runs 4× slower for 20 steps. Each phase's ideal is the sum of the ranks'
# speeds: 20 steps at (1 + 0.25)/2 of the no-straggler rate and 20 at all of it, so the ideal is
# 2/(1/0.625 + 1) = 0.769 of the rate measured without stragglers in the same run. Uniform split (what
# DDP does) and dynamic balancing every 20 and every 5 steps; the median of 3 runs of each. Prints; never
# fails on time. Knobs: STRAGGLER_STEPS (320), STRAGGLER_RUNS (3).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${HETRAIN_BIN:-build/bin/hetrain}  # another build to compare with
STEPS=${STRAGGLER_STEPS:-320}
RUNS=${STRAGGLER_RUNS:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
if [ ! -x "$BIN" ]; then echo "stragglers: $BIN is not built — skipped"; exit 0; fi

schedule=""
for ((s = 40; s < STEPS; s += 40)); do
  r=$(((s / 40) % 2))
  schedule+="${schedule:+,}$s:$r:0.25,$((s + 20)):$r:1"
done
COMMON=(--model lenet --synthetic 16384 --synthetic-shape 1,28,28 --synthetic-classes 10 --epochs 1000
        --global-batch 256 --lr 0.02 --max-steps "$STEPS" --log-every 100000)

rate() {  # extra args → samples/s after the first step, or "failed"
  local out
  out=$(mpirun --oversubscribe -n 2 "$BIN" train "${COMMON[@]}" "$@" 2>&1) || { echo failed; return; }
  grep '^done:' <<<"$out" | sed -n 's/.*steps, \([0-9.]*\) samples\/s.*/\1/p'
}
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "failed" }'; }
measure() {  # label extra-args...
  local label=$1 all=""
  shift
  for ((i = 0; i < RUNS; ++i)); do all+=" $(rate "$@")"; done
  printf '%s\n' "$(median <<<"$all")"
}

echo "== stragglers: 2 ranks, lenet 1x28x28, B=256, one rank 4x slower for 20 of every 40 steps (alternating),"
echo "   $STEPS steps, median of $RUNS runs; EMULATED speeds (sleeps), $(getconf _NPROCESSORS_ONLN) cores"
base=$(measure base --balance dynamic --rebalance-every 20)
ideal=$(awk -v r="$base" 'BEGIN { printf "%.1f", r * 2 / (1 / 0.625 + 1) }')
printf '   %-34s %10s samples/s\n' "no stragglers (dynamic)" "$base"
printf '   %-34s %10s samples/s  (0.769 x the above)\n' "ideal with stragglers" "$ideal"
for cfg in "uniform split|--balance none" "dynamic, refit every 20|--balance dynamic --rebalance-every 20" \
           "dynamic, refit every 5|--balance dynamic --rebalance-every 5"; do
  label=${cfg%%|*}
  read -r -a args <<<"${cfg#*|}"
  r=$(measure "$label" "${args[@]}" --emulate-schedule "$schedule")
  share=$(awk -v r="$r" -v i="$ideal" 'BEGIN { if (r + 0 > 0 && i + 0 > 0) printf "%.0f%%", 100 * r / i; else print "-" }')
  printf '   %-34s %10s samples/s  %s of ideal\n' "$label" "$r" "$share"
done
echo "   The balancer refits at once when a rank's two newest steps miss its model by more than 2x (or its four"
echo "   newest by more than 1.5x) the same way; a CPU-only job then re-requests the batches queued ahead."
