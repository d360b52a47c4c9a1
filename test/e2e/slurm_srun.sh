#!/usr/bin/env bash
# hetrain launched by real Slurm: srun (PMIx) and sbatch with jobs/train.sbatch, 2 tasks on this machine.
source "$(dirname "$0")/lib.sh"
start_slurm
ARGS=(--model mlp --synthetic 256 --synthetic-shape 1,8,8 --global-batch 32 --max-steps 6 --log-every 3)
timeout 180 srun --mpi=pmix -O -n 2 "$HETRAIN" train "${ARGS[@]}" >"$TMP/srun.out" 2>&1
rc=$?; cat "$TMP/srun.out"
[ $rc -eq 0 ] || fail "srun exit $rc"
# A launcher mismatch makes every task its own rank 0 of 1: insist on one world of 2.
grep -q "hetrain: 2 rank(s)" "$TMP/srun.out" || fail "srun did not give one world of 2 ranks"
[ "$(grep -c '^done:' "$TMP/srun.out")" -eq 1 ] || fail "expected exactly one rank 0"
timeout 180 sbatch --wait -O -n 2 -o "$TMP/job.out" jobs/train.sbatch "${ARGS[@]}" --checkpoint-dir "$TMP/ckpt" >/dev/null
rc=$?; cat "$TMP/job.out"
[ $rc -eq 0 ] || fail "sbatch job exit $rc"
grep -q "hetrain: 2 rank(s)" "$TMP/job.out" || fail "sbatch job did not run 2 ranks"
pass "srun and sbatch each ran one world of 2 ranks"
