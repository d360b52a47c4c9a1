#!/usr/bin/env bash
# The checkpoint folder belongs to one run (docs/checkpoint-format.md, "Files in the checkpoint folder"):
#  1. pruning keeps the newest --keep-checkpoints of this run's checkpoints (those it wrote and those of the
#     run it continues), says what it removed, and never touches a damaged file, a symlink or another run's
#     file, however high their numbers; --resume auto then continues this run;
#  2. every checkpoint damaged: --resume auto starts afresh with a warning naming them, and leaves them;
#  3. a second live job on the same folder is refused with one line naming the first; a lock left by a
#     killed job is taken over with a notice.
source "$(dirname "$0")/lib.sh"
ARGS=(--model lenet --synthetic 256 --synthetic-shape 1,28,28 --global-batch 32 --epochs 2 --device cpu
      --checkpoint-every 2)

# 1. A damaged checkpoint-00000500.h5, a symlink checkpoint-00000700.h5 and another seed's
#    checkpoint-00000900.h5 sit in the folder: with --keep-checkpoints 1 the run keeps its own newest.
run_mpi 2 "${ARGS[@]}" --seed 9 --max-steps 2 --quiet --checkpoint-dir "$TMP/other" || fail "the other run failed"
mkdir -p "$TMP/ck"
cp "$TMP/other/checkpoint-00000002.h5" "$TMP/ck/checkpoint-00000900.h5"
head -c 3000 "$TMP/ck/checkpoint-00000900.h5" >"$TMP/ck/checkpoint-00000500.h5"
ln -s "$TMP/other/checkpoint-00000002.h5" "$TMP/ck/checkpoint-00000700.h5"
run_mpi 2 "${ARGS[@]}" --max-steps 6 --keep-checkpoints 1 --checkpoint-dir "$TMP/ck" >"$TMP/out" 2>&1 \
  || { cat "$TMP/out"; fail "the run beside foreign checkpoints failed"; }
grep -q "holds 3 checkpoint file(s) this run does not continue (newest $TMP/ck/checkpoint-00000900.h5)" "$TMP/out" \
  || { cat "$TMP/out"; fail "no note about the checkpoints this run does not continue"; }
for s in 2 4; do
  grep -q "^checkpoint: removed $TMP/ck/checkpoint-0000000$s.h5 (--keep-checkpoints 1)" "$TMP/out" \
    || { cat "$TMP/out"; fail "no line about removing step $s"; }
done
[ "$(cd "$TMP/ck" && ls)" = "$(printf 'checkpoint-00000006.h5\ncheckpoint-00000500.h5\ncheckpoint-00000700.h5\ncheckpoint-00000900.h5')" ] \
  || fail "after pruning the folder holds: $(ls "$TMP/ck")"
[ -L "$TMP/ck/checkpoint-00000700.h5" ] && [ -f "$TMP/other/checkpoint-00000002.h5" ] || fail "the symlink or its target went"
cmp -s "$TMP/other/checkpoint-00000002.h5" "$TMP/ck/checkpoint-00000900.h5" || fail "another run's checkpoint changed"
echo "1. kept its own step 6 beside a damaged 500, a symlink 700 and another seed's 900"

# --resume auto continues this run (from step 6, past the damaged 500) once the other seed's file is gone
# (a checkpoint of another seed is a mistake to report, not a file to skip), and prunes step 6 itself.
rm "$TMP/ck/checkpoint-00000900.h5" "$TMP/ck/checkpoint-00000700.h5"
run_mpi 2 "${ARGS[@]}" --max-steps 10 --keep-checkpoints 2 --checkpoint-dir "$TMP/ck" --resume auto >"$TMP/out" 2>&1 \
  || { cat "$TMP/out"; fail "resume beside a damaged checkpoint failed"; }
grep -q "resume: $TMP/ck/checkpoint-00000006.h5 (step 6" "$TMP/out" || { cat "$TMP/out"; fail "did not resume from step 6"; }
grep -q "^checkpoint: removed $TMP/ck/checkpoint-00000006.h5" "$TMP/out" || { cat "$TMP/out"; fail "the resumed-from checkpoint was not pruned"; }
[ "$(cd "$TMP/ck" && ls)" = "$(printf 'checkpoint-00000008.h5\ncheckpoint-00000010.h5\ncheckpoint-00000500.h5')" ] \
  || fail "after the resumed run the folder holds: $(ls "$TMP/ck")"
echo "   resumed at step 6, pruned its own lineage to steps 8 and 10"

# 2. Every checkpoint damaged: a warning on stderr naming them, a fresh start, the files left alone.
mkdir -p "$TMP/bad"
head -c 2000 "$TMP/ck/checkpoint-00000008.h5" >"$TMP/bad/checkpoint-00000004.h5"
echo "not a checkpoint" >"$TMP/bad/checkpoint-00000002.h5"
run_mpi 2 "${ARGS[@]}" --max-steps 2 --quiet --checkpoint-dir "$TMP/bad" --resume auto >"$TMP/out" 2>"$TMP/err" \
  || { cat "$TMP/out" "$TMP/err"; fail "resume with every checkpoint damaged failed"; }
grep -q "^warning: --resume auto: every checkpoint in $TMP/bad is damaged (checkpoint-00000004.h5, checkpoint-00000002.h5); starting from the beginning" "$TMP/err" \
  || { cat "$TMP/out" "$TMP/err"; fail "no warning naming the damaged checkpoints"; }
[ "$(wc -c <"$TMP/bad/checkpoint-00000004.h5")" -eq 2000 ] || fail "a damaged checkpoint was changed"
echo "2. $(head -1 "$TMP/err")"

# 3. Two live jobs, one folder. The first runs slowly (rank 0 at 5% speed) until it is killed.
SLOW=(--model lenet --synthetic 3200 --synthetic-shape 1,28,28 --global-batch 32 --epochs 1000 --device cpu --quiet
      --emulate-speed 0.05,1)
timeout 120 mpirun -n 2 "$HETRAIN" train "${SLOW[@]}" --checkpoint-dir "$TMP/shared" >"$TMP/first.out" 2>&1 &
first=$!
for _ in $(seq 600); do [ -s "$TMP/shared/.hetrain.lock" ] && break; sleep 0.1; done
[ -s "$TMP/shared/.hetrain.lock" ] || { kill $first; fail "the first job took no lock within 60 s"; }
holder=$(cat "$TMP/shared/.hetrain.lock")
timeout 120 mpirun -n 2 "$HETRAIN" train "${ARGS[@]}" --max-steps 2 --checkpoint-dir "$TMP/shared" >"$TMP/out" 2>"$TMP/err"
rc=$?
kill -0 $first 2>/dev/null || { cat "$TMP/first.out"; fail "the first job ended early"; }
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "the second job on a locked folder: exit $rc"
[ "$(grep -c '^hetrain: error:' "$TMP/err")" -eq 1 ] || { cat "$TMP/err"; fail "not one error line"; }
grep -qF -- "--checkpoint-dir $TMP/shared is in use by another hetrain job (${holder%$'\n'})" "$TMP/err" \
  || { cat "$TMP/err"; fail "the refusal does not name the first job ($holder)"; }
echo "3. $(grep '^hetrain: error:' "$TMP/err")"
# SIGKILL the first job's ranks: the kernel drops the lock, the file still names them.
pkill -KILL -f -- "--checkpoint-dir $TMP/shared"
wait $first
run_mpi 2 "${ARGS[@]}" --max-steps 2 --checkpoint-dir "$TMP/shared" >"$TMP/out" 2>&1 \
  || { cat "$TMP/out"; fail "the job after a killed one could not take the folder"; }
grep -qF "checkpoints: took over the lock of $TMP/shared from a job that is gone (${holder%$'\n'})" "$TMP/out" \
  || { cat "$TMP/out"; fail "no notice about the stale lock"; }
[ ! -s "$TMP/shared/.hetrain.lock" ] || fail "a finished job left its name in the lock file"
pass "pruning keeps this run's newest and nothing else; all damaged: a warning; a second live job refused, a dead one's lock taken over"
