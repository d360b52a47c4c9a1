#!/usr/bin/env bash
# No wrong number leaves hetrain with exit 0 (docs/architecture.md, "Failures"): the fault-injection matrix
# {sync, async, hybrid} × {fp32, bf16, fp16} × {a non-finite loss gradient at one step, weights beyond FP16's
# range exchanged on a 16-bit wire, a NaN weight loaded with --init-from}. Each run either stops with
# a non-zero exit and the one line that says what was not finite, or (fp16's loss scaler) skips the step
# and goes on; in every case the newest checkpoint in its folder holds only finite values. Then the
# loaders and the evaluation: --resume and hetrain eval refuse a NaN checkpoint, eval refuses a model whose
# outputs overflow instead of scoring them.
source "$(dirname "$0")/lib.sh"
need_python h5py numpy

# The weights every fault starts from: 4 steps of a small mlp.
ARGS=(--model mlp --synthetic 1024 --synthetic-shape 1,16,16 --global-batch 32 --seed 5)
run_mpi 2 "${ARGS[@]}" --max-steps 4 --checkpoint-every 2 --checkpoint-dir "$TMP/base" --quiet >"$TMP/base.out" 2>&1 \
  || { cat "$TMP/base.out"; fail "the base run failed"; }
base=$TMP/base/checkpoint-00000004.h5
set_weight "$base" "$TMP/nan.h5" fc1.weight 3 nan || fail "cannot write the NaN weights"
set_weight "$base" "$TMP/big.h5" fc1.weight 3 70000 || fail "cannot write the 70000 weights"
set_weight "$base" "$TMP/huge.h5" fc1.weight 3 3e38 || fail "cannot write the 3e38 weights"

# check_run NAME RC OUT CKDIR WANT: WANT is "stop" (non-zero exit and the line matching $LINE), "skip"
# (exit 0 and fp16's skip line), or "either" (no fault for this precision to catch: a finite run that
# exits 0, or a stop with the line). Every case: the newest checkpoint of CKDIR is finite.
results=()
check_run() {
  local name=$1 rc=$2 out=$3 ckdir=$4 want=$5 got
  if [ "$rc" -ne 0 ]; then
    grep -qE "$LINE" "$out" || { cat "$out"; fail "$name: exit $rc without the line /$LINE/"; }
    [ "$(grep -cE "^hetrain: error: .*$LINE" "$out")" -ge 1 ] || { cat "$out"; fail "$name: the line is not hetrain's error"; }
    got=stop
  else
    grep -qiE "(^| )-?nan( |$)|loss -?nan|loss inf" "$out" && { cat "$out"; fail "$name: exit 0 with a NaN in its output"; }
    grep -q "^done:" "$out" || { cat "$out"; fail "$name: exit 0 without the run's last line"; }
    got=finished
    grep -q "FP16 gradient overflow (NaN/Inf after the reduction): step skipped" "$out" && got=skip
  fi
  case $want in
    stop) [ $got = stop ] || { cat "$out"; fail "$name: want a stop, got $got"; } ;;
    skip) [ $got = skip ] || { cat "$out"; fail "$name: want fp16's skip, got $got"; } ;;
    either) [ $got != skip ] || { cat "$out"; fail "$name: a skip without a loss scaler"; } ;;
  esac
  newest_checkpoint_finite "$ckdir" >"$TMP/finite.txt" || { cat "$TMP/finite.txt"; fail "$name: $(cat "$TMP/finite.txt")"; }
  results+=("$name: $got")
}

for mode in sync async hybrid; do
  # 3 ranks; hybrid: a group of two and one alone. Rank 1, whose step 1 is faulted, is the fastest, so it
  # surely gets there in the asynchronous modes.
  extra=(--emulate-speed 0.5,1,0.5); [ $mode = hybrid ] && extra+=(--groups 0,0,1)
  for precision in fp32 bf16 fp16; do
    wire=(); [ $precision != fp32 ] && wire=(--reduce-precision $precision)
    common=("${ARGS[@]}" --mode $mode "${extra[@]}" --precision $precision "${wire[@]}" --checkpoint-every 1)

    # 1. A non-finite loss gradient at rank 1's step 1: fp16 skips it, the others stop.
    LINE="(reduced|local) gradient has [0-9]+ NaN/Inf values \(the loss diverged"
    ck=$TMP/ck-$mode-$precision-loss
    run_mpi 3 "${common[@]}" --max-steps 16 --checkpoint-dir "$ck" --debug-overflow-at 1:1 >"$TMP/o.txt" 2>&1
    check_run "$mode $precision loss" $? "$TMP/o.txt" "$ck" $([ $precision = fp16 ] && echo skip || echo stop)

    # 2. A weight of 70000 (finite in FP32 and BF16, beyond FP16's 65504): on an fp16 wire sync's reduced
    # gradient overflows (the scaler halves its scale until it gives up), the asynchronous modes refuse
    # the center's 16-bit copy before training.
    LINE="65504|gradient has [0-9]+ NaN/Inf values"
    ck=$TMP/ck-$mode-$precision-wire
    run_mpi 3 "${common[@]}" --max-steps 20 --checkpoint-dir "$ck" --init-from "$TMP/big.h5" >"$TMP/o.txt" 2>&1
    check_run "$mode $precision wire" $? "$TMP/o.txt" "$ck" $([ $precision = fp16 ] && echo stop || echo either)

    # 3. A NaN weight in the --init-from file: refused before training, naming the file and the tensor.
    LINE="nan.h5: its tensor /parameters/fc1.weight \(1 of 65536 values are NaN/Inf, the first at element 3\): refusing to start from non-finite weights"
    ck=$TMP/ck-$mode-$precision-init
    run_mpi 3 "${common[@]}" --max-steps 4 --checkpoint-dir "$ck" --init-from "$TMP/nan.h5" >"$TMP/o.txt" 2>&1
    check_run "$mode $precision init" $? "$TMP/o.txt" "$ck" stop
  done
done
printf '%s\n' "${results[@]}"

# --resume FILE of a NaN checkpoint is refused, naming the tensor; --resume auto passes over it (as over a
# damaged file, saying why) to the newest good one.
mkdir -p "$TMP/resume" && cp "$TMP/base/checkpoint-00000002.h5" "$TMP/nan.h5" "$TMP/resume/"
mv "$TMP/resume/nan.h5" "$TMP/resume/checkpoint-00000004.h5"
out=$(run_mpi 2 "${ARGS[@]}" --max-steps 8 --resume "$TMP/resume/checkpoint-00000004.h5" 2>&1) \
  && fail "a resume from a NaN checkpoint exited 0: $out"
grep -q "checkpoint-00000004.h5: its tensor /parameters/fc1.weight (1 of 65536 values are NaN/Inf, the first at element 3): refusing to load non-finite weights" <<<"$out" \
  || fail "no line naming the NaN tensor of the resumed checkpoint: $out"
out=$(run_mpi 2 "${ARGS[@]}" --max-steps 8 --checkpoint-dir "$TMP/resume" --resume auto 2>&1) || fail "--resume auto: $out"
grep -q "^resume: skipping .*checkpoint-00000004.h5: its tensor /parameters/fc1.weight .*refusing to load non-finite weights" <<<"$out" \
  || fail "--resume auto did not say why it passed over the NaN checkpoint: $out"
grep -q "^resume: .*checkpoint-00000002.h5 (step 2" <<<"$out" || fail "--resume auto did not go on from the last good checkpoint: $out"
out=$(timeout 120 "$HETRAIN" eval --checkpoint "$TMP/nan.h5" --synthetic 256 2>&1) && fail "eval of a NaN checkpoint exited 0: $out"
grep -q "nan.h5: its tensor /parameters/fc1.weight .*refusing to load non-finite weights" <<<"$out" || fail "eval: $out"
# A finite checkpoint whose outputs overflow to Inf/NaN: no accuracy, one line, on 1 and on 2 ranks (training's
# validation goes through the same evaluation, train/evaluate.cpp).
for n in 1 2; do
  out=$(timeout 120 mpirun -n $n "$HETRAIN" eval --checkpoint "$TMP/huge.h5" --synthetic 256 2>&1) \
    && fail "eval of a model with non-finite outputs exited 0 on $n rank(s): $out"
  grep -q "^hetrain: error: evaluation: the model's outputs hold [0-9]* NaN/Inf values in [0-9]* of 256 samples (the first: sample [0-9]*): its weights are not finite or its forward pass overflows; no metric is computed$" <<<"$out" \
    || fail "eval on $n rank(s): $out"
  grep -qi "accuracy\|top-1" <<<"$out" && fail "eval printed a metric over non-finite scores: $out"
done
pass "27 runs (${#results[@]} checked): every fault stopped the job with its line or was skipped by fp16's scaler, no newest checkpoint holds a NaN; --resume and eval refuse non-finite weights, eval non-finite outputs"
