#!/usr/bin/env bash
# GPU ranks end to end without a GPU: hetrain built on the host emulation of CUDA, cuDNN, cuBLAS and NCCL
# (build/on-host/hetrain; test/gpu/on_host, docs/testing.md). It runs the trainer's device code, not a
# device: what it shows is the logic, not speed.
#  1. train_gpu.sh as a whole (lenet): one GPU rank learns and matches a CPU rank, a mixed CPU+GPU job keeps
#     identical replicas, GPU checkpoints resume and evaluate on either device, bf16/fp16 and an fp16 overflow;
#  2. the mixed job with the gradient in one bucket, in three and after backward (--bucket-mb 25, 0.001, 0) and a dynamic
#     split: it ends (a GPU rank once merged its buckets into one blocking reduction while CPU ranks started
#     one per bucket, and the job hung), matches one CPU rank and keeps identical replicas;
#  3. the asynchronous and hybrid modes with a GPU rank: every (epoch, sample) trained exactly once;
#  4. --metrics of the mixed job: the GPU rank reports the device memory it holds, the CPU rank none.
source "$(dirname "$0")/lib.sh"
ON_HOST=build/on-host/hetrain
[ -x "$ON_HOST" ] || skip "no $ON_HOST: a CUDA build (CUDA=1, or nvcc found) makes it"
export ASAN_OPTIONS=detect_leaks=0  # the MPI library keeps memory until exit, which is no leak of ours

HETRAIN_UNDER_TEST=$ON_HOST bash "$(dirname "$0")/train_gpu.sh" >"$TMP/train_gpu.log" 2>&1
rc=$?
cat "$TMP/train_gpu.log"
[ $rc -eq 0 ] && grep -q '^PASS' "$TMP/train_gpu.log" || fail "train_gpu.sh on the host emulation: exit $rc"
HETRAIN=$ON_HOST

# 2. the mixed job and its buckets
EQ=(--model lenet --synthetic 512 --synthetic-shape 1,28,28 --global-batch 32 --max-steps 12 --lr 0.05 --quiet)
run_mpi 1 "${EQ[@]}" --device cpu --dump-params "$TMP/cpu.bin" || fail "CPU reference run failed"
for mb in 25 0.001 0; do
  MIX=("${EQ[@]/--quiet/--log-every}" 6 --split 12,20 --bucket-mb $mb --debug-consistency --dump-params "$TMP/mixed-$mb-%r.bin"
       --metrics "$TMP/mixed-$mb.jsonl")
  timeout 120 mpirun -n 1 "$HETRAIN" train "${MIX[@]}" --device cpu : -n 1 "$HETRAIN" train "${MIX[@]}" --device cuda \
      >"$TMP/mixed-$mb.log" 2>&1
  rc=$?
  [ $rc -eq 124 ] && fail "the mixed CPU+GPU job with --bucket-mb $mb hung"
  [ $rc -eq 0 ] || { cat "$TMP/mixed-$mb.log"; fail "the mixed CPU+GPU job with --bucket-mb $mb failed (exit $rc)"; }
  echo "--bucket-mb $mb: $(grep -m1 '^gradients:' "$TMP/mixed-$mb.log")"
  cmp -s "$TMP/mixed-$mb-0.bin" "$TMP/mixed-$mb-1.bin" || fail "--bucket-mb $mb: the CPU and the GPU replica differ"
  float_compare "$TMP/cpu.bin" "$TMP/mixed-$mb-0.bin" 1e-3 || fail "--bucket-mb $mb: the mixed job differs from 1 CPU rank"
done
grep -qE "^gradients: .*[2-9] bucket" "$TMP/mixed-0.001.log" || fail "--bucket-mb 0.001 did not split the gradient into buckets"
DYN=(--model lenet --synthetic 512 --synthetic-shape 1,28,28 --global-batch 32 --max-steps 24 --lr 0.05 --balance dynamic
     --rebalance-every 4 --bucket-mb 0.001 --debug-consistency)
timeout 120 mpirun -n 1 "$HETRAIN" train "${DYN[@]}" --device cpu --dump-params "$TMP/dyn-%r.bin" : \
    -n 1 "$HETRAIN" train "${DYN[@]}" --device cuda --dump-params "$TMP/dyn-%r.bin" >"$TMP/dyn.log" 2>&1 \
  || { cat "$TMP/dyn.log"; fail "the mixed job with a dynamic split failed"; }
grep -m1 '^balance:' "$TMP/dyn.log"
cmp -s "$TMP/dyn-0.bin" "$TMP/dyn-1.bin" || fail "dynamic split: the CPU and the GPU replica differ"

# 3. the elastic modes with a GPU rank
ELASTIC=(train --model lenet --synthetic 512 --synthetic-shape 1,28,28 --global-batch 64 --epochs 2 --lr 0.05 --quiet)
for run in async async-bf16 hybrid; do
  case $run in
    async) extra=(--mode async) ;;
    async-bf16) extra=(--mode async --reduce-precision bf16) ;;
    hybrid) extra=(--mode hybrid --groups 0,0 --debug-consistency) ;;
  esac
  extra+=(--dump-samples "$TMP/$run-%r.txt")
  timeout 120 mpirun -n 1 "$HETRAIN" "${ELASTIC[@]}" "${extra[@]}" --device cpu : \
      -n 1 "$HETRAIN" "${ELASTIC[@]}" "${extra[@]}" --device cuda >"$TMP/$run.log" 2>&1 \
    || { cat "$TMP/$run.log"; fail "--mode $run with a GPU rank failed"; }
  seen=$(cat "$TMP/$run"-[01].txt | sort -u | wc -l)
  twice=$(cat "$TMP/$run"-[01].txt | sort | uniq -d | wc -l)
  [ "$seen" -eq 1024 ] && [ "$twice" -eq 0 ] || fail "$run: $seen of 1024 (epoch, sample) pairs trained, $twice twice"
  echo "$run: every (epoch, sample) once; the GPU rank trained $(wc -l <"$TMP/$run-1.txt") of them"
done

# 4. memory in the metrics (a synchronous step's line has every rank's figures)
/usr/bin/python3 - "$TMP/mixed-25.jsonl" <<'PY' || fail "the metrics do not show the GPU rank's device memory"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
last = [l for l in lines if "device_mib" in l][-1]
print("device_mib per rank:", last["device_mib"], " device_peak_mib:", last["device_peak_mib"])
assert last["device_mib"][0] == 0 and last["device_peak_mib"][0] == 0, "the CPU rank holds device memory"
assert last["device_peak_mib"][1] > 0, "the GPU rank reports no device memory"
PY

# A start-up refusal every rank reaches alike (PowerSGD with a GPU rank): one line from rank 0 and a clean
# exit, without Open MPI's MPI_ABORT banner.
PS=(--model mlp --synthetic 64 --synthetic-shape 1,8,8 --global-batch 16 --max-steps 2 --compress powersgd:4)
timeout 120 mpirun -n 1 "$HETRAIN" train "${PS[@]}" --device cpu : -n 1 "$HETRAIN" train "${PS[@]}" --device cuda \
  >"$TMP/powersgd.log" 2>&1 && fail "--compress with a GPU rank was accepted"
[ "$(grep -c '^hetrain: error: --compress powersgd:4: PowerSGD runs on CPU ranks only so far' "$TMP/powersgd.log")" -eq 1 ] \
  && ! grep -q MPI_ABORT "$TMP/powersgd.log" || { cat "$TMP/powersgd.log"; fail "--compress with a GPU rank: not one line without MPI_ABORT"; }
pass "on the host emulation of CUDA: train_gpu.sh passes; the mixed CPU+GPU job ends and keeps identical replicas with 1 or more buckets and a dynamic split; async and hybrid train every sample once with a GPU rank; the GPU rank reports its device memory; PowerSGD with a GPU rank is one line without MPI_ABORT"
