#!/usr/bin/env bash
# A run killed outright (SIGKILL) and its --metrics (docs/report.md, "A run that was killed"):
#  - its lines stay in METRICS.tmp-PID and nothing appears at METRICS;
#  - hetrain report plots them; a last line cut short is left out with one note, the complete lines are used;
#  - the next run writing the same --metrics keeps that temporary file as METRICS.killed-PID, saying so in one
#    line, leaves the temporary file of a process that still runs alone, and writes its own complete METRICS;
#    a run after it leaves METRICS.killed-PID alone.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import matplotlib' || fail "missing python3-matplotlib: run make deps"
M="$TMP/m.jsonl"
ARGS=(--model mlp --synthetic 256 --synthetic-shape 1,8,8 --global-batch 16 --lr 0.01 --device cpu --quiet
      --metrics "$M")

# A run far too long to end by itself, killed once its temporary file holds 3 lines (every line is flushed).
"$HETRAIN" train "${ARGS[@]}" --epochs 100000 >"$TMP/long.out" 2>&1 &
pid=$!
at_exit "kill -9 $pid 2>/dev/null"
tmpf="$M.tmp-$pid"
for _ in $(seq 1200); do
  [ -f "$tmpf" ] && [ "$(wc -l <"$tmpf")" -ge 3 ] && break
  kill -0 $pid 2>/dev/null || { cat "$TMP/long.out"; fail "the long run ended by itself"; }
  sleep 0.1
done
[ -f "$tmpf" ] && [ "$(wc -l <"$tmpf")" -ge 3 ] || fail "no 3 lines in $tmpf after 2 minutes"
kill -9 $pid
wait $pid 2>/dev/null
[ -f "$tmpf" ] || fail "the killed run left no $tmpf"
[ ! -e "$M" ] || fail "the killed run left $M, which looks complete"

# Cut its last line short, as a kill in the middle of a write would: the complete lines, then half a line.
lines=$(/usr/bin/python3 - "$tmpf" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
complete = data[:data.rindex(b"\n") + 1]
lines = complete.split(b"\n")[:-1]
open(sys.argv[1], "wb").write(complete + lines[-1][:len(lines[-1]) // 2])
print(len(lines))
PY
) || fail "could not cut the last line"
"$HETRAIN" report "$tmpf" -o "$TMP/killed.png" >"$TMP/report.out" 2>"$TMP/report.err" \
  || { cat "$TMP/report.err"; fail "hetrain report refused the metrics of the killed run"; }
[ "$(wc -l <"$TMP/report.err")" -eq 1 ] \
  && grep -qF "hetrain report: note: $tmpf: line $((lines + 1)) is cut short (the run was stopped while writing it): using the $lines complete lines before it" "$TMP/report.err" \
  || { cat "$TMP/report.err"; fail "no one-line note about the cut line"; }
grep -q "$lines steps" "$TMP/report.out" || { cat "$TMP/report.out"; fail "the report did not use the $lines complete lines"; }
[ -s "$TMP/killed.png" ] || fail "no report written"
echo "report of the killed run: $(cat "$TMP/report.err")"

# The next run on the same path: the dead process's file is kept under a name that says so, a live process's
# file (this shell's) stays as it is.
: >"$M.tmp-$$"
"$HETRAIN" train "${ARGS[@]}" --max-steps 3 >"$TMP/next.out" 2>&1 || { cat "$TMP/next.out"; fail "the next run failed"; }
kept="$M.killed-$pid"
grep -qxF "metrics: kept $tmpf, the lines of a run that was killed (process $pid), as $kept" "$TMP/next.out" \
  || { cat "$TMP/next.out"; fail "the next run did not say it kept $tmpf as $kept"; }
[ ! -e "$tmpf" ] && [ -f "$kept" ] || { ls -la "$TMP"; fail "the next run did not keep $tmpf as $kept"; }
[ "$(head -c -1 "$kept" | wc -l)" -eq "$lines" ] || fail "$kept does not hold the killed run's $lines lines"
[ -e "$M.tmp-$$" ] || fail "the next run removed the temporary file of a process that still runs"
[ "$(wc -l <"$M")" -eq 3 ] || fail "$M does not hold the next run's 3 lines"
"$HETRAIN" train "${ARGS[@]}" --max-steps 2 >"$TMP/third.out" 2>&1 || { cat "$TMP/third.out"; fail "the third run failed"; }
[ -f "$kept" ] || fail "the third run removed $kept"
! grep -q "^metrics:" "$TMP/third.out" || { cat "$TMP/third.out"; fail "the third run said something of the metrics"; }
pass "a SIGKILLed run's metrics: report uses the $lines complete lines and notes the cut one; the next run keeps them as $(basename "$kept"), no later run removes it"
