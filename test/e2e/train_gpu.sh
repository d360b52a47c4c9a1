#!/usr/bin/env bash
# Training on GPUs, where a GPU answers (skipped otherwise; `hetrain devices` says why):
#  1. one GPU rank learns (loss falls, accuracy above chance) and the rank table names the GPU;
#  2. invariant 1 across devices: a fixed split on GPU ranks (NCCL when they are all GPUs) matches one CPU
#     rank within the tolerance of different summation orders (cuDNN's algorithms). Two GPU ranks need two
#     GPUs (one rank per GPU): with one GPU this is a single rank, whose NCCL reduction is the identity, so
#     multi-rank NCCL is exercised only on machines with two GPUs or more;
#  3. a mixed job (a CPU rank and a GPU rank, MPMD launch) reduces over MPI and keeps identical replicas;
#  4. checkpoints from a GPU rank: stopped and resumed on the GPU, the result matches the uninterrupted GPU
#     run; a GPU checkpoint resumed on the CPU, and `hetrain eval` on the GPU against the CPU, agree within
#     the same tolerance;
#  5. mixed precision (docs/precision.md): bf16 and fp16 GPU runs stay near the fp32 GPU run (16-bit operands:
#     a looser tolerance), the rank table names the precision, a mixed CPU+GPU job at bf16 keeps identical
#     replicas (FP32 master weights and update everywhere), and an FP16 overflow on the GPU rank is skipped.
#
# test/e2e/train_gpu_on_host.sh runs this script on the host emulation of CUDA: HETRAIN_UNDER_TEST names the
# binary to test instead of build/bin/hetrain.
source "$(dirname "$0")/lib.sh"
HETRAIN=${HETRAIN_UNDER_TEST:-$HETRAIN}
# Skipped only when `hetrain devices` ran and reported no GPU (exit 3). A missing or crashing binary is a
# failure, not "no GPU here"; and under HETRAIN_REQUIRE_GPU=1 (scripts/gpu-check.sh, on GPU machines) no GPU
# is a failure too.
[ -x "$HETRAIN" ] || fail "$HETRAIN is missing: run make"
devices=$("$HETRAIN" devices 2>&1)
status=$?
case $status in
  0) ;;
  3) if [ "${HETRAIN_REQUIRE_GPU:-0}" != 0 ]; then fail "HETRAIN_REQUIRE_GPU=1 but $devices"; fi
     skip "$devices" ;;
  *) fail "hetrain devices failed (exit $status): $devices" ;;
esac
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
[ "$ranks" = 1 ] && echo "note: one GPU, so one GPU rank: multi-rank NCCL is not exercised here (it needs two GPUs)"
run_mpi "$ranks" "${EQ[@]}" --device cuda --split "$split" --dump-params "$TMP/gpu.bin" || fail "GPU run failed"
float_compare "$TMP/cpu.bin" "$TMP/gpu.bin" 1e-3 || fail "$ranks GPU rank(s) with split $split differ from 1 CPU rank"

timeout 300 mpirun -n 1 "$HETRAIN" train "${EQ[@]}" --device cpu --split 12,20 --debug-consistency \
    --dump-params "$TMP/mixed%r.bin" : -n 1 "$HETRAIN" train "${EQ[@]}" --device cuda --split 12,20 \
    --debug-consistency --dump-params "$TMP/mixed%r.bin" >"$TMP/mixed.log" 2>&1 || { cat "$TMP/mixed.log"; fail "mixed CPU+GPU run failed"; }
float_compare "$TMP/cpu.bin" "$TMP/mixed0.bin" 1e-3 || fail "the mixed CPU+GPU job differs from 1 CPU rank"
# 4. checkpoints written from GPU memory, resumed on either device, evaluated on either device
run_mpi 1 "${EQ[@]}" --device cuda --checkpoint-dir "$TMP/ck" --stop-at-step 5 || fail "GPU run to step 5 failed"
run_mpi 1 "${EQ[@]}" --device cuda --checkpoint-dir "$TMP/ck" --resume auto --dump-params "$TMP/gpu-resumed.bin" \
  || fail "GPU resume failed"
run_mpi 1 "${EQ[@]}" --device cuda --dump-params "$TMP/gpu-whole.bin" || fail "uninterrupted GPU run failed"
float_compare "$TMP/gpu-whole.bin" "$TMP/gpu-resumed.bin" 1e-4 || fail "GPU run resumed at step 5 differs from the whole run"
run_mpi 1 "${EQ[@]}" --device cpu --resume "$TMP/ck/checkpoint-00000005.h5" --dump-params "$TMP/cpu-resumed.bin" \
  || fail "resuming a GPU checkpoint on the CPU failed"
float_compare "$TMP/cpu.bin" "$TMP/cpu-resumed.bin" 1e-3 || fail "a GPU checkpoint resumed on the CPU differs"
ck="$TMP/ck/checkpoint-00000012.h5"
for d in cpu cuda; do
  "$HETRAIN" eval --checkpoint "$ck" --synthetic 512 --device $d --quiet --dump-batch "$TMP/eval-$d.h5" >"$TMP/eval-$d" \
    || fail "eval on $d failed"
done
/usr/bin/python3 -c "
import sys, h5py, numpy as np
a, b = (h5py.File('$TMP/eval-%s.h5' % d, 'r')['logits'][()] for d in ('cpu', 'cuda'))
diff, scale = float(np.abs(a - b).max()), float(np.abs(a).max())
print('eval logits, GPU against CPU: max |diff| %.3g (scale %.3g)' % (diff, scale))
sys.exit(0 if diff <= 1e-3 * scale + 1e-5 else 1)" || fail "eval on the GPU differs from the CPU"
# 5. mixed precision
run_mpi 1 "${EQ[@]}" --device cuda --dump-params "$TMP/gpu-fp32.bin" || fail "fp32 GPU run failed"
for p in bf16 fp16; do
  run_mpi 1 "${EQ[@]/--quiet/--log-every}" 4 --device cuda --precision $p --metrics "$TMP/$p.jsonl" \
    --dump-params "$TMP/gpu-$p.bin" >"$TMP/$p.log" 2>&1 || { cat "$TMP/$p.log"; fail "--precision $p GPU run failed"; }
  grep -qE "cuda:0 .*, $p, fits" "$TMP/$p.log" || { cat "$TMP/$p.log"; fail "the rank table does not say $p"; }
  # 12 steps of lenet from the same start: 16-bit operands move the parameters by a few 2^-8 relative
  float_compare "$TMP/gpu-fp32.bin" "$TMP/gpu-$p.bin" 2e-2 || fail "--precision $p drifted from the fp32 GPU run"
done
grep -q '"loss_scale":65536' "$TMP/fp16.jsonl" || fail "the fp16 run's metrics carry no loss scale"
timeout 300 mpirun -n 1 "$HETRAIN" train "${EQ[@]}" --device cpu --split 12,20 --precision bf16 --debug-consistency \
    --dump-params "$TMP/mixed-bf16-%r.bin" : -n 1 "$HETRAIN" train "${EQ[@]}" --device cuda --split 12,20 \
    --precision bf16 --debug-consistency --dump-params "$TMP/mixed-bf16-%r.bin" >"$TMP/mixed-bf16.log" 2>&1 \
  || { cat "$TMP/mixed-bf16.log"; fail "mixed CPU+GPU run at bf16 failed"; }
cmp -s "$TMP/mixed-bf16-0.bin" "$TMP/mixed-bf16-1.bin" || fail "the CPU and the bf16 GPU replica differ"
run_mpi 1 "${EQ[@]/--quiet/--log-every}" 4 --device cuda --precision fp16 --debug-overflow-at 0:3 >"$TMP/ovf.log" 2>&1 \
  || { cat "$TMP/ovf.log"; fail "fp16 GPU run with an overflow failed"; }
grep -q "^step 3 (sync mode): FP16 gradient overflow .* loss scale now 32768" "$TMP/ovf.log" || { cat "$TMP/ovf.log"; fail "no skip line"; }
pass "GPU runs match the CPU reference; a mixed CPU+GPU job keeps identical replicas; GPU checkpoints resume and evaluate on either device; bf16/fp16 stay near fp32, a bf16 mixed job keeps identical replicas, an fp16 overflow is skipped"
