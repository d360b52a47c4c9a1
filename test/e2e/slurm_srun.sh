#!/usr/bin/env bash
# hetrain launched by real Slurm: srun (PMIx) and sbatch with jobs/train.sbatch, 2 tasks on this machine;
# jobs/pack.sbatch packing a folder dataset with 2 tasks, the same bytes as a serial pack.
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
/usr/bin/python3 test/e2e/png_folder.py "$TMP/img" || fail "writing test images"
timeout 180 sbatch --wait -O -n 2 -o "$TMP/pack.out" jobs/pack.sbatch "$TMP/img" --size 12 --shards 2 \
  -o "$TMP/packed.h5" >/dev/null
rc=$?; cat "$TMP/pack.out"
[ $rc -eq 0 ] || fail "pack job exit $rc"
grep -q "pack.sbatch: job [0-9]*, 2 task(s)" "$TMP/pack.out" || fail "pack job did not run 2 tasks"
$PACK folder "$TMP/img" --size 12 --shards 2 -o "$TMP/serial.h5" --no-progress >/dev/null || fail "serial pack"
for s in 0 1; do
  cmp <(h5dump -d /images "$TMP/packed-0000$s-of-00002.h5" | tail -n +3) \
      <(h5dump -d /images "$TMP/serial-0000$s-of-00002.h5" | tail -n +3) >/dev/null || fail "shard $s differs from a serial pack"
done
$PACK inspect "$TMP/packed.h5" --verify | grep -q "verify       OK" || fail "the packed dataset does not verify"
pass "srun and sbatch each ran one world of 2 ranks; pack.sbatch packed 15 images with 2 tasks, same bytes as serial"
