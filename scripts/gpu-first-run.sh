#!/usr/bin/env bash
# The first run on a GPU machine, in at most GPU_FIRST_RUN_BUDGET_S (540 s, 9 minutes) of wall time on one
# GPU, with everything that run must tell in one file, OUTDIR/summary.txt:
#   versions      the driver, CUDA runtime, cuDNN, cuBLAS and NCCL versions the loaded libraries report, and
#                 the file each was loaded from (test/gpu/versions_test.cpp), beside nvidia-smi's view
#   gpu-tests     every GPU unit test (test_gpu) with its parity figures against its CPU twin: per test the
#                 largest |GPU - CPU|, the largest relative difference and the worst share of the tolerance
#                 (RESULT parity lines, test/gpu/gpu_test_util.hpp)
#   resnet20      60 steps of resnet20 (synthetic 3x32x32, batch 64) on the GPU at fp32, bf16 and fp16 (fp16
#                 with an overflow injected at step 3: the step must be skipped), each final loss against the
#                 same run on the CPU (fails beyond 5 % at fp32, 15 % at bf16/fp16)
#   yolov5n       one yolov5n training step (bench_train_step, 320x320, batch 16) at fp32, tf32 and fp16:
#                 img/s and the objective after 12 steps against the CPU's (reported, not judged: the fixed
#                 objective is unbounded)
#   resnet50      the resnet50 224x224 batch-64 step next to PyTorch's at fp32, tf32, bf16, fp16 (as
#                 gpu-check.sh; no PyTorch with CUDA: that column says "no PyTorch" and nothing fails for it)
#   mixed         a CPU rank and a GPU rank under mpirun with --bucket-mb 25, 0.25 and 0 (resnet20's gradient
#                 is one 25 MiB bucket; 0.25 makes four): each must finish (a hang is a timeout) with
#                 identical replicas; then the same pair in --mode async with bf16 center trades (the GPU
#                 rank serves its shard while it waits for its GPU) and in --mode hybrid as one group:
#                 each must finish and train every sample exactly once per epoch
#   rebalance-memory  a mixed CPU+GPU job whose split changes (dynamic balancing, the GPU rank emulated slower
#                 and then fast again): the GPU rank's own allocations from the metrics (device_mib,
#                 device_peak_mib, per step) and nvidia-smi's memory.used for the whole GPU, sampled every
#                 0.2 s; the peaks before the first rebalance and after each one. Fails when the GPU rank
#                 ends holding more than 10 % + 64 MiB above what it held at an earlier step with at least
#                 its final batch (memory that follows the split's history, not the split: the activation
#                 pool keeping idle batch sizes)
#   memcheck      compute-sanitizer --tool memcheck on the tests of the custom kernels
# Each part runs under its own `timeout`, its share of the budget (never more than is left of it), and ends
# as passed, FAILED (why), NOT RUN (why: a missing program, the budget spent) or SKIPPED (no GPU where
# HETRAIN_REQUIRE_GPU=0). The summary's last line names every part that did not pass; the exit status is 0
# only when every part passed. HETRAIN_REQUIRE_GPU is 1 unless set: without a GPU every GPU part fails.
#
#   scripts/gpu-first-run.sh [OUTDIR]    (default build/gpu-first-run; in a bundle: ./gpu-first-run)
#   make gpu-first-run [OUT=dir]
#
# From the repository it uses build/bin (a CUDA build: make gpu-first-run builds it), bench/ and models/.
# From a bundle (scripts/gpu-bundle.sh) it uses the bundle's bin/, lib/ and models/; the bundle carries
# Open MPI's mpirun and components (lib/openmpi), made usable by gpu-lib.sh for one node. A bundle made
# without them (no Open MPI on the build host) leaves mixed and rebalance-memory NOT RUN (no mpirun), which
# fails the run. Files: OUTDIR/summary.txt, results.txt (every RESULT line), test_gpu.log, and one log per part.
set -uo pipefail
started=$SECONDS
budget=${GPU_FIRST_RUN_BUDGET_S:-540}
source "$(dirname "$0")/gpu-lib.sh"
gpu_layout gpu-first-run
out=${1:-$default_out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/summary.txt
export HETRAIN_GPU_RESULTS=$out/results.txt
: >"$HETRAIN_GPU_RESULTS"
export HETRAIN_REQUIRE_GPU=${HETRAIN_REQUIRE_GPU:-1}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader} OMPI_MCA_btl_base_warn_component_unused=0
# Open MPI binds each of 2 ranks to one core by default: the CPU rank's --threads would share that core.
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
HETRAIN=$bin/hetrain
models=$root/models
[ -n "$in_bundle" ] && models=$here/models
threads=$(nproc 2>/dev/null || echo 4)
[ "$threads" -gt 16 ] && threads=16
GPU_TORCH_PROBE_TIMEOUT_S=${GPU_TORCH_PROBE_TIMEOUT_S:-30} gpu_find_torch_python
gpu_add_wheel_libs "$bin/test_gpu" "$bin/bench_train_step" "$bin/hetrain"

names=() statuses=()
say() { echo "$1" | tee -a "$summary"; }
# done_part NAME STATUS: records and prints "part NAME: STATUS".
done_part() { names+=("$1"); statuses+=("$2"); say "part $1: $2"; }
# share NAME SECONDS: sets lim to the part's time limit (its share, or what is left of the budget less 5 s);
# returns 1, having recorded NOT RUN, when less than 10 s would be left.
share() {
  local left=$((budget - (SECONDS - started) - 5))
  lim=$2
  [ "$left" -lt "$lim" ] && lim=$left
  if [ "$lim" -lt 10 ]; then done_part "$1" "NOT RUN (the ${budget} s budget is spent)"; return 1; fi
  say ""; say "== $1 (time limit $lim s)"
}
timed_out() { [ "$1" -eq 124 ] || [ "$1" -eq 137 ]; }

gpu_header "hetrain gpu-first-run" >"$summary"
say "budget: ${budget} s; layout: $([ -n "$in_bundle" ] && echo "bundle $here" || echo "repository $root"); HETRAIN_REQUIRE_GPU=$HETRAIN_REQUIRE_GPU"

# Is there a GPU? (hetrain devices: exit 0 with one, 3 without; else nvidia-smi -L.)
gpu_why=""
if [ -x "$HETRAIN" ] && [ -z "$(missing_libs "$HETRAIN")" ]; then
  d=$(timeout -k 5 30 "$HETRAIN" devices 2>&1); [ $? -eq 0 ] || gpu_why=${d:-hetrain devices failed}
elif ! nvidia-smi -L >/dev/null 2>&1; then
  gpu_why="nvidia-smi -L found no GPU"
fi
gpu_why=$(head -1 <<<"$gpu_why")
# no_gpu NAME: when no GPU was seen, records the part FAILED (SKIPPED with HETRAIN_REQUIRE_GPU=0), returns 0.
no_gpu() {
  [ -n "$gpu_why" ] || return 1
  if [ "$HETRAIN_REQUIRE_GPU" != 0 ]; then done_part "$1" "FAILED (no GPU: $gpu_why)"
  else done_part "$1" "SKIPPED (no GPU: $gpu_why)"; fi
}
# need_bin NAME FILE: records NOT RUN unless FILE is there and all its libraries are found.
need_bin() {
  if [ ! -x "$2" ]; then done_part "$1" "NOT RUN ($2 is not there$([ -n "$in_bundle" ] && echo ": the bundle was made without it" || echo ": make CUDA=1 $2"))"; return 1; fi
  local m; m=$(missing_libs "$2")
  if [ -n "$m" ]; then done_part "$1" "NOT RUN (shared libraries not found for $(basename "$2"): ${m% })"; return 1; fi
  if [[ "$(ldd "$2" 2>/dev/null)" != *libcudart* ]]; then done_part "$1" "NOT RUN ($2 is a CPU-only build)"; return 1; fi
}
need_mpirun() {
  command -v mpirun >/dev/null 2>&1 && return 0
  done_part "$1" "NOT RUN (no mpirun$([ -n "$in_bundle" ] && echo ": this bundle carries no Open MPI" || echo " on PATH"))"
  return 1
}
# final_loss LOG: the loss of hetrain's "done: ... final train loss X" line.
final_loss() { sed -n 's/^done: .*final train loss \([-0-9.eE+naif]*\).*/\1/p' "$1" | tail -1; }
# rel A B: |A - B| / |B|, or "nan".
rel() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) { print "nan"; exit } d = a - b; if (d < 0) d = -d; s = b < 0 ? -b : b; printf "%.3g", d / s }'; }
within() { awk -v r="$1" -v t="$2" 'BEGIN { exit !(r != "nan" && r + 0 <= t + 0) }'; }

# ---------------------------------------------------------------- versions
if share versions 20 && need_bin versions "$bin/test_gpu"; then
  timeout -k 10 "$lim" "$bin/test_gpu" --gtest_filter='GpuVersions.*' >"$out/versions.log" 2>&1
  rc=$?
  grep -E '^RESULT (versions|loaded) ' "$out/versions.log" | sed 's/^RESULT /  /' | tee -a "$summary" >/dev/null
  driver=$(sed -n 's/^RESULT versions driver=\([0-9]*\).*/\1/p' "$out/versions.log")
  if timed_out $rc; then done_part versions "FAILED (timed out after $lim s)"
  elif [ $rc -ne 0 ] || [ -z "$driver" ]; then done_part versions "FAILED (test_gpu exit $rc: $(grep -m1 -E 'Failure|error' "$out/versions.log" | cut -c1-160))"
  elif [ "$driver" = 0 ]; then done_part versions "FAILED (no NVIDIA driver loaded: libcuda.so.1 is missing or unusable)"
  else done_part versions passed; fi
fi

# ---------------------------------------------------------------- GPU unit tests and their parity figures
if share gpu-tests 110 && need_bin gpu-tests "$bin/test_gpu"; then
  gpu_run_tests "$out" "$lim" --gtest_filter='-GpuVersions.*'
  say "$gt_line"
  gpu_parity_table "$HETRAIN_GPU_RESULTS" "$out/test_gpu.log" | tee -a "$summary" >/dev/null
  grep -E '^RESULT' "$HETRAIN_GPU_RESULTS" | grep -vE '^RESULT (parity|versions|loaded) ' | sed 's/^/  /' | tee -a "$summary" >/dev/null
  if [ $gt_rc -eq 0 ]; then done_part gpu-tests passed
  else done_part gpu-tests "FAILED (${gt_why:-$gt_failed test(s) failed, exit $gt_rc})"; fi
fi

# ---------------------------------------------------------------- resnet20, 60 steps, against the CPU
R20=(train --model resnet20 --synthetic 3840 --synthetic-shape 3,32,32 --global-batch 64 --max-steps 60 --seed 1
     --lr 0.05 --log-every 20)
if share resnet20 50 && need_bin resnet20 "$HETRAIN" && ! no_gpu resnet20; then
  t0=$SECONDS bad=""
  each=$((lim / 5 > 8 ? lim / 5 : 8))
  run20() {  # run20 TAG ARGS...: one run, its log in OUT/resnet20-TAG.log; sets loss (empty when it failed)
    local tag=$1 left=$((lim - (SECONDS - t0))) rc; shift
    loss=""
    [ "$left" -lt 5 ] && { bad+=" $tag: not run (time limit);"; return; }
    timeout -k 10 "$left" "$HETRAIN" "${R20[@]}" "$@" >"$out/resnet20-$tag.log" 2>&1; rc=$?
    if timed_out $rc; then bad+=" $tag: timed out;"; return; fi
    [ $rc -eq 0 ] || { bad+=" $tag: exit $rc ($(grep -m1 'error' "$out/resnet20-$tag.log" | cut -c1-120));"; return; }
    loss=$(final_loss "$out/resnet20-$tag.log")
  }
  run20 cpu --device cpu --threads "$threads"; cpu_loss=$loss
  run20 cpu-fp16-overflow --device cpu --threads "$threads" --precision fp16 --debug-overflow-at 0:3; cpu16_loss=$loss
  for p in fp32 bf16 fp16; do
    extra=(); ref=$cpu_loss tol=0.05
    [ $p = fp16 ] && extra=(--debug-overflow-at 0:3) ref=$cpu16_loss
    [ $p != fp32 ] && tol=0.15
    run20 "cuda-$p" --device cuda --precision $p "${extra[@]}"
    r=$(rel "$loss" "$ref")
    say "  resnet20 60 steps cuda $p$([ $p = fp16 ] && echo ' (overflow injected at step 3)'): final loss ${loss:-none}, CPU ${ref:-none}$([ $p = fp16 ] && echo ' (same skip)'), |diff|/CPU $r (allowed $tol)"
    [ -n "$loss" ] && ! within "$r" $tol && bad+=" $p differs from the CPU by $r;"
  done
  if [ -f "$out/resnet20-cuda-fp16.log" ] && ! grep -q '^step 3: FP16 gradient overflow' "$out/resnet20-cuda-fp16.log"; then
    bad+=" fp16: no skipped-step line for the injected overflow;"
  fi
  [ -z "$bad" ] && done_part resnet20 passed || done_part resnet20 "FAILED (${bad# })"
fi

# ---------------------------------------------------------------- the mixed CPU+GPU job, with and without buckets
MIX=(train --model resnet20 --synthetic 1024 --synthetic-shape 3,32,32 --global-batch 64 --max-steps 12 --split 24,40
     --lr 0.05 --debug-consistency --log-every 4)
if share mixed 80 && need_bin mixed "$HETRAIN" && need_mpirun mixed && ! no_gpu mixed; then
  t0=$SECONDS bad=""
  for mb in 25 0.25 0; do
    left=$((lim - (SECONDS - t0)))
    [ "$left" -lt 5 ] && { bad+=" bucket-mb $mb: not run (time limit);"; continue; }
    log=$out/mixed-bucket-$mb.log
    timeout -k 10 "$left" mpirun -n 1 "$HETRAIN" "${MIX[@]}" --device cpu --threads "$threads" --bucket-mb $mb \
      --dump-params "$out/mixed-$mb-%r.bin" : -n 1 "$HETRAIN" "${MIX[@]}" --device cuda --bucket-mb $mb \
      --dump-params "$out/mixed-$mb-%r.bin" >"$log" 2>&1
    rc=$?
    buckets=$(grep -m1 '^gradients:' "$log" | cut -c1-100)
    if timed_out $rc; then bad+=" bucket-mb $mb: hung (timed out after $left s);"; r="hung"
    elif [ $rc -ne 0 ]; then bad+=" bucket-mb $mb: exit $rc;"; r="exit $rc: $(grep -m1 'error' "$log" | cut -c1-120)"
    elif ! cmp -s "$out/mixed-$mb-0.bin" "$out/mixed-$mb-1.bin"; then bad+=" bucket-mb $mb: replicas differ;"; r="replicas differ"
    else r="done, identical replicas, final loss $(final_loss "$log")"; fi
    say "  mixed cpu+cuda --bucket-mb $mb: $r ($buckets)"
  done
  # The elastic modes on the same pair: each (epoch, sample) must appear exactly once in the ranks' dumps.
  ELASTIC=(train --model resnet20 --synthetic 512 --synthetic-shape 3,32,32 --global-batch 64 --epochs 2 --lr 0.05
           --log-every 1000)
  for run in async-bf16 hybrid-one-group; do
    left=$((lim - (SECONDS - t0)))
    [ "$left" -lt 5 ] && { bad+=" $run: not run (time limit);"; continue; }
    case $run in
      async-bf16) extra=(--mode async --reduce-precision bf16) ;;
      *) extra=(--mode hybrid --groups 0,0 --debug-consistency) ;;
    esac
    log=$out/mixed-$run.log
    rm -f "$out/mixed-$run"-[01].txt
    timeout -k 10 "$left" mpirun -n 1 "$HETRAIN" "${ELASTIC[@]}" "${extra[@]}" --device cpu --threads "$threads" \
      --dump-samples "$out/mixed-$run-%r.txt" : -n 1 "$HETRAIN" "${ELASTIC[@]}" "${extra[@]}" --device cuda \
      --dump-samples "$out/mixed-$run-%r.txt" >"$log" 2>&1
    rc=$?
    seen=$(cat "$out/mixed-$run"-[01].txt 2>/dev/null | sort -u | wc -l)
    twice=$(cat "$out/mixed-$run"-[01].txt 2>/dev/null | sort | uniq -d | wc -l)
    if timed_out $rc; then bad+=" $run: hung (timed out after $left s);"; r="hung"
    elif [ $rc -ne 0 ]; then bad+=" $run: exit $rc;"; r="exit $rc: $(grep -m1 'error' "$log" | cut -c1-120)"
    elif [ "$seen" -ne 1024 ] || [ "$twice" -ne 0 ]; then
      bad+=" $run: samples not once per epoch;"; r="$seen of 1024 (epoch, sample) pairs, $twice twice"
    else r="done, every sample once per epoch, $(grep -m1 '^done:' "$log" | cut -d, -f3- | cut -c1-110)"; fi
    say "  mixed cpu+cuda --mode ${run%%-*}: $r"
  done
  [ -z "$bad" ] && done_part mixed passed || done_part mixed "FAILED (${bad# })"
fi

# ---------------------------------------------------------------- peak GPU memory around a rebalance
REB=(train --model resnet20 --synthetic 16384 --synthetic-shape 3,32,32 --global-batch 256 --max-steps 80
     --balance dynamic --rebalance-every 5 --emulate-schedule 30:1:0.2,55:1:1 --lr 0.05 --log-every 5)
if share rebalance-memory 40 && need_bin rebalance-memory "$HETRAIN" && need_mpirun rebalance-memory \
   && ! no_gpu rebalance-memory; then
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    done_part rebalance-memory "NOT RUN (no nvidia-smi to sample the GPU's memory)"
  else
    samples=$out/rebalance-memory.samples
    : >"$samples"
    ( while :; do echo "$(date +%s.%N) $(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)"; sleep 0.2; done ) >>"$samples" &
    sampler=$!
    timeout -k 10 "$lim" mpirun -n 1 "$HETRAIN" "${REB[@]}" --device cpu --threads "$threads" \
      --metrics "$out/rebalance-memory.jsonl" : -n 1 "$HETRAIN" "${REB[@]}" --device cuda \
      --metrics "$out/rebalance-memory.jsonl" 2>&1 | while IFS= read -r l; do echo "$(date +%s.%N) $l"; done \
      >"$out/rebalance-memory.log"
    rc=${PIPESTATUS[0]}
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    # Peak memory.used (MiB) before the first rebalance line, then between each rebalance and the next.
    awk '
      FNR == NR { if ($2 ~ /^[0-9]+$/) { n++; ts[n] = $1; mb[n] = $2 } next }
      / rebalance: / { k++; at[k] = $1; sub(/^[0-9.]+ rebalance: /, ""); what[k] = $0 }
      END {
        if (n == 0) { print "  no memory samples"; exit }
        lo = 0; hi = (k >= 1) ? at[1] : 1e99; peak = 0; for (i = 1; i <= n; i++) if (ts[i] < hi && mb[i] > peak) peak = mb[i]
        printf "  peak GPU memory.used before the first rebalance: %d MiB\n", peak
        for (j = 1; j <= k; j++) {
          lo = at[j]; hi = (j < k) ? at[j + 1] : 1e99; p = 0
          for (i = 1; i <= n; i++) if (ts[i] >= lo && ts[i] < hi && mb[i] > p) p = mb[i]
          printf "  after rebalance %d (%s): peak %d MiB\n", j, substr(what[j], 1, 90), p
        }
        all = 0; for (i = 1; i <= n; i++) if (mb[i] > all) all = mb[i]
        printf "  overall peak %d MiB over %d samples (nvidia-smi --query-gpu=memory.used, whole GPU with the CUDA context and libraries, every 0.2 s)\n", all, n
      }' "$samples" "$out/rebalance-memory.log" | tee -a "$summary" >/dev/null
    # The GPU rank's (rank 1's) own allocations per step, from the metrics: "b":[cpu,gpu], "device_mib":[0,x].
    follows=""
    if [ -s "$out/rebalance-memory.jsonl" ]; then
      follows=$(awk '
        function second(key,   m) { if (!match($0, "\"" key "\":\\[[^]]*\\]")) return -1
          m = substr($0, RSTART, RLENGTH); sub(/^[^[]*\[[^,]*,/, "", m); sub(/\].*$/, "", m); return m + 0 }
        { n++; step[n] = $0; sub(/^.*"step":/, "", step[n]); sub(/,.*$/, "", step[n])
          b[n] = second("b"); mib[n] = second("device_mib"); peak[n] = second("device_peak_mib")
          if (n == 1 || b[n] != b[n - 1]) printf "  step %s: GPU rank batch %d, hetrain holds %.0f MiB on the GPU (peak so far %.0f MiB)\n", step[n], b[n], mib[n], peak[n] > "/dev/stderr" }
        END {
          if (n == 0 || mib[n] < 0) { print "no device_mib in the metrics"; exit }
          last_change = n; while (last_change > 1 && b[last_change - 1] == b[n]) last_change--
          best = -1; for (i = 1; i < last_change; i++) if (b[i] >= b[n] && mib[i] > best) best = mib[i]
          printf "  end: GPU rank batch %d, %.0f MiB held, peak %.0f MiB", b[n], mib[n], peak[n] > "/dev/stderr"
          if (best < 0) { print " (no earlier step had a batch this large: not judged)" > "/dev/stderr"; print "ok"; exit }
          printf "; an earlier step with batch >= %d held %.0f MiB\n", b[n], best > "/dev/stderr"
          print (mib[n] <= 1.10 * best + 64) ? "ok" : sprintf("the GPU rank ends holding %.0f MiB at batch %d, above the %.0f MiB it held at an earlier step with at least that batch", mib[n], b[n], best)
        }' "$out/rebalance-memory.jsonl" 2>>"$summary")
    fi
    nreb=$(grep -c ' rebalance: ' "$out/rebalance-memory.log")
    nsamp=$(grep -cE ' [0-9]+$' "$samples")
    if timed_out "$rc"; then done_part rebalance-memory "FAILED (timed out after $lim s)"
    elif [ "$rc" -ne 0 ]; then done_part rebalance-memory "FAILED (exit $rc: $(grep -m1 'error' "$out/rebalance-memory.log" | cut -d' ' -f2- | cut -c1-120))"
    elif [ "$nreb" -eq 0 ]; then done_part rebalance-memory "FAILED (the split never changed)"
    elif [ "$nsamp" -lt 3 ]; then done_part rebalance-memory "FAILED (nvidia-smi gave $nsamp memory samples)"
    elif [ "$follows" != ok ]; then done_part rebalance-memory "FAILED (${follows:-no metrics file})"
    else done_part rebalance-memory passed; fi
  fi
fi

# ---------------------------------------------------------------- yolov5n step at fp32, tf32, fp16
if share yolov5n 40 && need_bin yolov5n "$bin/bench_train_step" && ! no_gpu yolov5n; then
  if [ ! -f "$models/yolov5n.yaml" ]; then
    done_part yolov5n "NOT RUN ($models/yolov5n.yaml is missing)"
  else
    t0=$SECONDS bad=""
    Y=(--model "$models/yolov5n.yaml" --size 320 --batch 16 --classes 80 --warmup 2 --steps 10)
    ystep() {  # ystep TAG ARGS...: sets y_line (empty when it failed; bad says why)
      local tag=$1 left=$((lim - (SECONDS - t0))) rc; shift
      y_line=""
      [ "$left" -lt 5 ] && { bad+=" $tag: not run (time limit);"; return; }
      timeout -k 10 "$left" "$bin/bench_train_step" "${Y[@]}" "$@" >"$out/yolov5n-$tag.log" 2>&1; rc=$?
      if timed_out $rc; then bad+=" $tag: timed out;"
      elif [ $rc -ne 0 ]; then bad+=" $tag: exit $rc ($(tail -1 "$out/yolov5n-$tag.log" | cut -c1-120));"
      else y_line=$(grep -m1 '^impl=' "$out/yolov5n-$tag.log"); fi
    }
    ystep cpu --device cpu --threads "$threads"; cpu_obj=$(field loss "$y_line")
    for p in fp32 tf32 fp16; do
      ystep "cuda-$p" --device cuda --precision $p
      obj=$(field loss "$y_line")
      if [ -n "$y_line" ] && ! awk -v x="$obj" 'BEGIN { exit !(x == x + 0 && x - x == 0) }'; then bad+=" $p: objective $obj;"; fi
      say "  yolov5n 320 b16 cuda $p: $(field samples_per_s "$y_line") img/s, objective after 12 steps ${obj:-none} (CPU ${cpu_obj:-none}, |diff|/CPU $(rel "$obj" "$cpu_obj")), GPU memory $(field dev_mem_mb "$y_line") MB"
    done
    [ -z "$bad" ] && done_part yolov5n passed || done_part yolov5n "FAILED (${bad# })"
  fi
fi

# ---------------------------------------------------------------- memcheck on the custom kernels
KERNEL_TESTS='CudaBatchNorm.*:CudaCast.*:CudaElementwise.*:CudaEma.*:CudaNewOps.*:CudaNormalizeCropFlip.*:CudaPool.*:CudaGlobalAvgPool.*:CudaRelu.*:CudaSgd.*:CudaSgdUpdate.*:CudaSoftmaxXent.*:CudaTop1.*'
sanitizer=$(command -v compute-sanitizer 2>/dev/null)
for c in "${CUDA_HOME:-}/bin/compute-sanitizer" /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [ -z "$sanitizer" ] && [ -x "$c" ] && sanitizer=$c
done
if share memcheck 60 && need_bin memcheck "$bin/test_gpu"; then
  if [ -z "$sanitizer" ]; then
    done_part memcheck "NOT RUN (compute-sanitizer not found: not on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin)"
  elif ! no_gpu memcheck; then
    timeout -k 10 "$lim" "$sanitizer" --tool memcheck --error-exitcode 99 --print-limit 20 "$bin/test_gpu" \
      --gtest_filter="$KERNEL_TESTS" >"$out/memcheck.log" 2>&1
    rc=$?
    say "  $("$sanitizer" --version 2>/dev/null | tail -1); $(grep -m1 'ERROR SUMMARY' "$out/memcheck.log" | sed 's/^========= //')"
    # What finished before a timeout still counts for something: the tests that passed under memcheck, and
    # whether it had reported any error by then.
    ran=$(grep -c '^\[       OK \]' "$out/memcheck.log")
    found=$(grep -c '^========= \(Invalid\|Program hit\|Uninitialized\|Race\)' "$out/memcheck.log")
    if timed_out $rc; then
      done_part memcheck "FAILED (timed out after $lim s, with $ran test(s) passed under memcheck and $found error report(s) by then)"
    elif [ $rc -eq 99 ]; then done_part memcheck "FAILED ($(grep -m1 'ERROR SUMMARY' "$out/memcheck.log" | sed 's/^========= //'))"
    elif [ $rc -ne 0 ]; then done_part memcheck "FAILED (exit $rc: a test failed under memcheck)"
    else done_part memcheck passed; fi
  fi
fi

# ---------------------------------------------------------------- resnet50 next to PyTorch
if share resnet50 140 && need_bin resnet50 "$bin/bench_train_step" && ! no_gpu resnet50; then
  step_log=$out/bench-step.log
  : >"$step_log"
  report() { say "  $1"; }
  saved_started=$started saved_budget=$budget
  started=$SECONDS budget=$lim step_cap=$((lim / 4 > 20 ? lim / 4 : 20))
  BENCH_STEPS=${BENCH_STEPS:-10} BENCH_MAX_SECONDS=${BENCH_MAX_SECONDS:-8} gpu_resnet50_bench
  started=$saved_started budget=$saved_budget
  [ -n "$bench_note" ] && say "$bench_note"
  if [ ${#bench_failed[@]} -eq 0 ]; then done_part resnet50 passed
  else done_part resnet50 "FAILED ($(printf '%s; ' "${bench_failed[@]}" | sed 's/; $//'))"; fi
fi

# ---------------------------------------------------------------- verdict
say ""
say "== parts ($((SECONDS - started)) s of ${budget} s; files in $out)"
not_passed=()
for i in "${!names[@]}"; do
  say "  ${names[$i]}: ${statuses[$i]}"
  [ "${statuses[$i]}" = passed ] || not_passed+=("${names[$i]}: ${statuses[$i]}")
done
if [ ${#not_passed[@]} -gt 0 ]; then
  say "gpu-first-run: FAILED: ${#not_passed[@]} of ${#names[@]} parts did not pass: $(printf '%s; ' "${not_passed[@]}" | sed 's/; $//')"
  exit 1
fi
say "gpu-first-run: passed: all ${#names[@]} parts (${names[*]})"
