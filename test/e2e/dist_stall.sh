#!/usr/bin/env bash
# Failures that are not errors (docs/architecture.md, "Failures"):
#  1. a stalled rank (SIGSTOP) is noticed: after --stall-timeout the job ends with one line naming the
#     rank, whether it stopped before it arrived or after (a fast rank waiting for the slow one), instead
#     of the others waiting forever;
#  2. a rank killed with SIGKILL ends the job within seconds, and --resume auto continues from the last
#     checkpoint to the same parameters as an uninterrupted run.
source "$(dirname "$0")/lib.sh"
COMMON=(--synthetic 3200 --global-batch 32 --epochs 3 --lr 0.05 --split 8,8,8,8 --device cpu --quiet)
ARGS=(--model lenet --synthetic-shape 1,28,28 "${COMMON[@]}")
SLOW=(--emulate-speed 0.05,1,1,1)  # rank 0 sleeps: the run lasts long enough to be interrupted

# rank_pids DIR: the hetrain rank processes of the run writing checkpoints to DIR (not timeout or mpirun)
rank_pids() {
  for p in $(pgrep -f -- "--checkpoint-dir $1"); do
    [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$HETRAIN")" ] && echo "$p"
  done
}
wait_for() { for _ in $(seq 300); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }
# wait_for_checkpoint DIR: any checkpoint in DIR (hybrid runs step fast and keep only the newest few)
wait_for_checkpoint() {
  for _ in $(seq 300); do compgen -G "$1/checkpoint-*.h5" >/dev/null && return 0; sleep 0.1; done; return 1
}

# stop_rank R DIR: starts the slow job writing checkpoints to DIR, SIGSTOPs rank R after its first
# checkpoint (step 2) and waits
# for the job to end; sets stall_took (seconds from the stop to the end) and leaves stderr in $TMP/err.
stop_rank() {
  local r=$1 dir=$2 launcher pids p stopped="" rc start
  timeout 120 mpirun -n 4 "$HETRAIN" train "${RUN[@]}" "${SLOW[@]}" --checkpoint-dir "$dir" \
    --checkpoint-every 2 --stall-timeout 4 >"$TMP/out" 2>"$TMP/err" &
  launcher=$!
  wait_for_checkpoint "$dir" || { kill $launcher; fail "no checkpoint within 30 s"; }
  pids=($(rank_pids "$dir"))
  [ ${#pids[@]} -eq 4 ] || { kill $launcher; fail "expected 4 rank processes, found ${#pids[@]}"; }
  # The ranks started in rank order; OMPI_COMM_WORLD_RANK in each one's environment says which is which.
  for p in "${pids[@]}"; do
    tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$r" && stopped=$p
  done
  [ -n "$stopped" ] || { kill $launcher; fail "cannot find rank $r's process"; }
  sleep 0.$((RANDOM % 10))  # anywhere in a step: computing, waiting for the others or reducing
  start=$(date +%s)
  kill -STOP "$stopped"
  wait $launcher
  rc=$?
  stall_took=$(( $(date +%s) - start ))
  kill -CONT "$stopped" 2>/dev/null; kill -KILL "$stopped" 2>/dev/null
  grep '^hetrain: error' "$TMP/err" | head -3
  [ $rc -ne 124 ] || fail "the job hung with rank $r stopped"
  [ $rc -ne 0 ] || fail "exit 0 with rank $r stopped"
  # Stopped before it arrived, it "did not arrive"; stopped while it waited for the others or inside the
  # step's reductions, it "arrived, then fell silent"; rank 0 stopped while it wrote a checkpoint "did not
  # arrive at the checkpoint" (twice the timeout); with --bn sync, stopped inside its forward or backward
  # pass, it "did not arrive at the batch-norm statistics" (or at their average before a checkpoint); in a hybrid group its partner names it at one
  # of the group's meetings (step = local step). Either way the line names it, and comes first, and no
  # line names another rank.
  local at="the checkpoint within 8 s|the batch-norm statistics within 8 s|the batch-norm statistics' average within 8 s|the group's (gradient reduction|center trade|rebalance vote) within 4 s"
  grep -m1 '^hetrain: error' "$TMP/err" | grep -Eq "step [0-9]+: rank $r on $(hostname) (did not arrive within 4 s|did not arrive at ($at)|arrived, then fell silent)" \
    || { cat "$TMP/err"; fail "the first error line does not name the stopped rank $r"; }
  # Every rank an error line names, past the speaker's own "rank R on HOST: ", must be the stopped one
  # (a line naming it and another, as "rank 0 on vm, rank 1 on vm made no local step", accuses rank 1).
  if grep '^hetrain: error' "$TMP/err" | sed -E 's/^hetrain: error: rank [0-9]+ on [^:]+: //' \
      | grep -oE "rank [0-9]+ on" | grep -vx "rank $r on" | grep -q .; then
    cat "$TMP/err"; fail "an error line accuses a rank other than the stopped rank $r"
  fi
  [ $stall_took -le 60 ] || fail "the job took $stall_took s to end after rank $r stopped (timeout 4 s)"
}

# 1. SIGSTOP rank 0, the slow one (watched by rank 1), then rank 2, a fast one: it spends most of a step
#    waiting for rank 0, after it arrived
RUN=("${ARGS[@]}")
stop_rank 0 "$TMP/stall0"
took0=$stall_took
stop_rank 2 "$TMP/stall2"
echo "1. rank 0 stopped: named, the job ended after $took0 s; rank 2 stopped: named, ended after $stall_took s"

# 1a. --bn sync: the ranks meet inside the forward and backward pass (every batch-norm layer's sums), where
#     a stopped rank keeps the others from the step's own meeting: those meetings name it too.
# resnet20's step is longer than lenet's: rank 0 only twice as slow, so that a loaded machine still brings
# it to each meeting well within the 4 s timeout (an innocent rank must not look stalled).
RUN=(--model resnet20 --synthetic-shape 3,8,8 --bn sync "${COMMON[@]}")
SLOW=(--emulate-speed 0.5,1,1,1)
stop_rank 2 "$TMP/bn2"
bn_took=$stall_took
stop_rank 0 "$TMP/bn0"
echo "1a. --bn sync: rank 2 stopped: named after $bn_took s; rank 0 stopped: named after $stall_took s"
RUN=("${ARGS[@]}")
SLOW=(--emulate-speed 0.05,1,1,1)

# 1d. PowerSGD's compressed reduction (its own collectives after the step's meeting): the stopped rank is
#     named and nobody else.
RUN=("${ARGS[@]}" --compress powersgd:2)
stop_rank 2 "$TMP/psgd2"
echo "1d. --compress powersgd:2: rank 2 stopped: named after $stall_took s"

# 1e. hybrid, groups {0, 1} and {2, 3}: a member's partner names it at one of the group's meetings, before
#     the other group's watch of the shared counter (which cannot tell a stopped member from the partner
#     that waits for it) would speak. Rank 0 leads the slow group, rank 3 is a member of the fast one.
RUN=(--model lenet --synthetic-shape 1,28,28 --synthetic 3200 --global-batch 32 --epochs 30 --lr 0.05 --device cpu
     --quiet --mode hybrid --groups 0,0,1,1)
stop_rank 0 "$TMP/hybrid0"
hybrid_took=$stall_took
stop_rank 3 "$TMP/hybrid3"
echo "1e. hybrid: rank 0 (a leader) stopped: named after $hybrid_took s; rank 3 (a member): after $stall_took s"
RUN=("${ARGS[@]}")

# 1c. A rank stopped for less than the timeout and continued (a node swapping, a debugger) is no stall: the
#     time it was away counts against nobody, so neither it nor the others accuse anyone and the run ends.
dir="$TMP/pause"
timeout 120 mpirun -n 4 "$HETRAIN" train "${ARGS[@]}" "${SLOW[@]}" --max-steps 12 --checkpoint-dir "$dir" \
  --checkpoint-every 2 --stall-timeout 4 >"$TMP/out" 2>"$TMP/err" &
launcher=$!
wait_for "$dir/checkpoint-00000002.h5" || { kill $launcher; fail "no checkpoint at step 2 within 30 s"; }
for p in $(rank_pids "$dir"); do
  tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=1" && paused=$p
done
kill -STOP "$paused"; sleep 3; kill -CONT "$paused"
wait $launcher || { cat "$TMP/err"; fail "a rank stopped for 3 s of a 4 s timeout ended the job"; }
grep -q '^hetrain: error' "$TMP/err" && { cat "$TMP/err"; fail "an error line after a 3 s pause"; }
echo "1c. rank 1 paused for 3 s (timeout 4 s): nobody accused, the run ended"

# 1b. Rank 0 hangs while it writes a checkpoint (a FIFO where its temporary file goes blocks the open, as a
#     hung file system would): the others, waiting for it, name it.
dir="$TMP/hung"
timeout 120 mpirun -n 4 "$HETRAIN" train "${ARGS[@]}" "${SLOW[@]}" --checkpoint-dir "$dir" --checkpoint-every 2 \
  --stall-timeout 4 >"$TMP/out" 2>"$TMP/err" &
launcher=$!
wait_for "$dir/checkpoint-00000002.h5" || { kill $launcher; fail "no checkpoint at step 2 within 30 s"; }
for p in $(rank_pids "$dir"); do
  tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=0" && mkfifo "$dir/checkpoint-00000040.h5.tmp-$p"
done
start=$(date +%s)
wait $launcher
rc=$?
took=$(( $(date +%s) - start ))
grep '^hetrain: error' "$TMP/err" | head -3
[ $rc -ne 124 ] || fail "the job hung with rank 0 hung in a checkpoint write"
[ $rc -ne 0 ] || { cat "$TMP/out"; fail "exit 0: rank 0's checkpoint write did not hang (no FIFO in its way?)"; }
grep -m1 '^hetrain: error' "$TMP/err" | grep -Eq "step 39: rank 0 on $(hostname) did not arrive at the checkpoint within 8 s" \
  || { cat "$TMP/err"; fail "the first error line does not name rank 0, hung in its checkpoint write"; }
echo "1b. rank 0 hung in a checkpoint write: named, the job ended $took s after the checkpoint at step 2"

# 2. SIGKILL rank 1, then resume
run_mpi 4 "${ARGS[@]}" --dump-params "$TMP/full.bin" || fail "uninterrupted run failed"
timeout 120 mpirun -n 4 "$HETRAIN" train "${ARGS[@]}" "${SLOW[@]}" --checkpoint-dir "$TMP/kill" --checkpoint-every 3 \
  >"$TMP/out" 2>"$TMP/err" &
launcher=$!
wait_for "$TMP/kill/checkpoint-00000006.h5" || { kill $launcher; fail "no checkpoint at step 6 within 30 s"; }
pids=($(rank_pids "$TMP/kill"))
start=$(date +%s)
kill -KILL "${pids[1]}"
wait $launcher
rc=$?
took=$(( $(date +%s) - start ))
[ $rc -ne 124 ] && [ $rc -ne 0 ] || fail "exit $rc after SIGKILL of a rank"
[ $took -le 20 ] || fail "the job took $took s to end after a rank was killed"
last=$(ls "$TMP/kill" | grep -v tmp | sort | tail -1)
run_mpi 4 "${ARGS[@]}" --checkpoint-dir "$TMP/kill" --resume auto --dump-params "$TMP/resumed.bin" >"$TMP/out" 2>&1 \
  || { cat "$TMP/out"; fail "resume after SIGKILL failed"; }
grep -q "resume: $TMP/kill/$last" "$TMP/out" || { cat "$TMP/out"; fail "did not resume from the last checkpoint $last"; }
cmp "$TMP/full.bin" "$TMP/resumed.bin" || fail "resumed after SIGKILL: parameters differ from the uninterrupted run's"
pass "SIGSTOP: named, the job ended after $took0 s (rank 0) and $stall_took s (rank 2); SIGKILL: job ended in $took s, resumed from $last bit-identically"
