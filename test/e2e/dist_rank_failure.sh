#!/usr/bin/env bash
# Invariant 6: an error on one rank in the middle of training ends the whole job, with one line naming the
# rank, the host and the cause, and a non-zero exit — nobody waits forever in a collective.
source "$(dirname "$0")/lib.sh"
start=$(date +%s)
timeout 120 mpirun -n 4 "$HETRAIN" train --model mlp --synthetic 512 --synthetic-shape 1,8,8 --global-batch 32 \
  --epochs 5 --quiet --debug-fail-at 2:7 >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err" | grep -v '^$' | head -5
[ $rc -ne 124 ] || fail "the job hung after rank 2 failed"
[ $rc -ne 0 ] || fail "exit code 0 after a rank failed"
grep -q "hetrain: error: rank 2 on $(hostname).*failure injected by --debug-fail-at at step 7" "$TMP/err" \
  || fail "no error line naming rank 2, the host and the cause"
pass "rank 2 failed at step 7; the job ended in $(( $(date +%s) - start )) s with exit code $rc"
