#!/usr/bin/env bash
# Training on GPUs, where a GPU answers (skipped otherwise; `hetrain devices` says why):
#  1. one GPU rank learns (loss falls, accuracy above chance) and the rank table names the GPU;
#  2. invariant 1 across devices: a fixed split on GPU ranks (NCCL when they are all GPUs) matches one CPU
#     rank within the tolerance of different summation orders (cuDNN's algorithms);
#  3. a mixed job (a CPU rank and a GPU rank, MPMD launch) reduces over MPI and keeps identical replicas.
source "$(dirname "$0")/lib.sh"
devices=$("$HETRAIN" devices 2>&1) || skip "$devices"
echo "$devices"
ngpu=$(grep -c '^cuda:' <<<"$devices")

DATA=(--synthetic 1024 --synthetic-shape 1,28,28 --synthetic-val 256 --model lenet --global-batch 64)
run_mpi 1 "${DATA[@]}" --device cuda --epochs 3 --lr 0.05 >"$TMP/gpu.log" 2>&1 || { cat "$TMP/gpu.log"; fail "1-GPU run failed"; }
grep -q 'cuda:0' "$TMP/gpu.log" || fail "the rank table does not name the GPU"
acc=$(grep -oE 'accuracy [0-9.]+%' "$TMP/gpu.log" | tail -1 | grep -oE '[0-9.]+')
awk -v a="$acc" 'BEGIN { exit !(a > 30) }' || fail "1-GPU lenet reached only ${acc}% (chance is 10%)"
echo "1 GPU: validation accuracy ${acc}%"

EQ=(--model lenet --synthetic 512 --synthetic-shape 1,28,28 --global-batch 32 --max-steps 12 --lr 0.05 --quiet)
run_mpi 1 "${EQ[@]}" --device cpu --dump-params "$TMP/cpu.bin" || fail "CPU reference run failed"
ranks=$(( ngpu >= 2 ? 2 : 1 ))
split=$([ "$ranks" = 2 ] && echo 9,23 || echo 32)
run_mpi "$ranks" "${EQ[@]}" --device cuda --split "$split" --dump-params "$TMP/gpu.bin" || fail "GPU run failed"
float_compare "$TMP/cpu.bin" "$TMP/gpu.bin" 1e-3 || fail "$ranks GPU rank(s) with split $split differ from 1 CPU rank"

timeout 300 mpirun -n 1 "$HETRAIN" train "${EQ[@]}" --device cpu --split 12,20 --debug-consistency \
    --dump-params "$TMP/mixed%r.bin" : -n 1 "$HETRAIN" train "${EQ[@]}" --device cuda --split 12,20 \
    --debug-consistency --dump-params "$TMP/mixed%r.bin" >"$TMP/mixed.log" 2>&1 || { cat "$TMP/mixed.log"; fail "mixed CPU+GPU run failed"; }
float_compare "$TMP/cpu.bin" "$TMP/mixed0.bin" 1e-3 || fail "the mixed CPU+GPU job differs from 1 CPU rank"
pass "GPU runs match the CPU reference; a mixed CPU+GPU job keeps identical replicas"
