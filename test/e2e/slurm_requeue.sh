#!/usr/bin/env bash
# Preemption under real Slurm: a job submitted with jobs/train.sbatch gets SIGUSR1 in mid-run (as
# --signal=USR1@120 sends it before the time limit), checkpoints, exits 75, requeues itself, resumes with
# --resume auto, and finishes with the same parameters as an uninterrupted run.
source "$(dirname "$0")/lib.sh"
start_slurm
ARGS=(--model lenet --synthetic 2048 --synthetic-shape 1,28,28 --global-batch 32 --epochs 2 --lr 0.05 --split 12,20
      --device cpu --log-every 16 --checkpoint-dir "$TMP/ckpt" --checkpoint-every 8)
timeout 180 srun --mpi=pmix -O -n 2 "$HETRAIN" train "${ARGS[@]/$TMP\/ckpt/$TMP/ref}" --quiet \
  --dump-params "$TMP/reference.bin" >"$TMP/ref.out" 2>&1 || { cat "$TMP/ref.out"; fail "uninterrupted run failed"; }
# Rank 0 sleeps 19x its compute time (emulated heterogeneity): the run lasts long enough to be signalled.
job=$(sbatch --parsable -O -n 2 -o "$TMP/job.out" jobs/train.sbatch "${ARGS[@]}" --emulate-speed 0.05,1 \
  --dump-params "$TMP/requeued.bin") || fail "sbatch failed"
for _ in $(seq 600); do [ -f "$TMP/ckpt/checkpoint-00000008.h5" ] && break; sleep 0.1; done
[ -f "$TMP/ckpt/checkpoint-00000008.h5" ] || { scancel "$job"; cat "$TMP/job.out"; fail "no checkpoint at step 8 within 60 s"; }
scancel --signal=USR1 "$job" || fail "scancel --signal=USR1 failed"
# Wait for the requeued run to finish. Slurm holds a requeued job back for a while before it is eligible
# again (minutes here); the test moves its start time to a few seconds from now rather than wait for that.
# Not to now: slurmd refuses a job credential made within the second it revoked the job's last one.
released=0
for _ in $(seq 900); do
  state=$(scontrol show job "$job" 2>/dev/null | grep -oE 'JobState=[A-Z_]+' | cut -d= -f2)
  restarts=$(scontrol show job "$job" 2>/dev/null | grep -oE 'Restarts=[0-9]+' | cut -d= -f2)
  if [ "${restarts:-0}" -ge 1 ] && [ "$state" = PENDING ] && [ $released -eq 0 ]; then
    scontrol update JobId="$job" StartTime=now+3 && released=1
  fi
  [ "${restarts:-0}" -ge 1 ] && [[ "$state" =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT)$ ]] && break
  sleep 0.2
done
cat "$TMP/job.out" | grep -E 'train.sbatch|stopped|resum|done|error' | sed 's/^/    /'
[ "${restarts:-0}" -ge 1 ] || { scancel "$job"; fail "the job was not requeued (state $state)"; }
[ "$state" = COMPLETED ] || { scancel "$job"; fail "the requeued job ended $state"; }
grep -q "stopped after step [0-9]* of 128 (stop signal)" "$TMP/job.out" || fail "no 'stopped after step' line"
grep -q "requeueing job $job" "$TMP/job.out" || fail "the script did not requeue the job"
grep -q "resume: $TMP/ckpt/checkpoint-" "$TMP/job.out" || fail "the second run did not resume from a checkpoint"
cmp "$TMP/reference.bin" "$TMP/requeued.bin" || fail "the requeued job's parameters differ from the uninterrupted run's"
pass "job $job: signalled, checkpointed, requeued, resumed and finished bit-identical to an uninterrupted run"
