# scripts/gpu-lib.sh — shared by scripts/gpu-check.sh and scripts/gpu-first-run.sh (sourced, not run; the
# bundle of scripts/gpu-bundle.sh carries it beside them). Every function writes only where it is told to.
#
#   gpu_layout NAME        sets here, root, bin, torch_bench, in_bundle and the default output folder
#                          (bundle: ./NAME, with lib/ put first on LD_LIBRARY_PATH and the bundled Open MPI
#                          made usable; repository: build/NAME)
#   gpu_find_torch_python  sets torch_py (a Python whose torch sees a GPU, else one that imports torch)
#   gpu_add_wheel_libs BIN...  adds PyTorch's CUDA wheel folders for libraries ldd cannot find for BIN...
#   gpu_header TITLE       the summary's first lines: the GPU, the driver, and which library files ldd picks
#   gpu_run_tests OUT TIMEOUT [ARGS]   test_gpu with HETRAIN_GPU_RESULTS; sets gt_rc, gt_line, gt_why
#   run_step NAME CMD...   one benchmark under timeout (cap: $step_cap, default 120 s, less when the budget
#                          $budget from $started is short); sets m_line or m_why; log in $step_log
#   gpu_resnet50_bench     the resnet50 224 b64 comparison with PyTorch at fp32, tf32, bf16, fp16: calls
#                          `report LINE` per precision, appends to bench_failed what hetrain left unmeasured
#   gpu_parity_table RESULTS LOG   per test of test_gpu's LOG: its status and its parity figures from RESULTS
set -uo pipefail
export LC_NUMERIC=C               # printf/awk read and write "812.5"
orig_ld_path=${LD_LIBRARY_PATH-}  # Python runs with this: the bundle's lib/ could shadow its own libraries
py() { LD_LIBRARY_PATH=$orig_ld_path "$@"; }

gpu_layout() {
  local name=$1
  here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
  if [ -x "$here/bin/test_gpu" ]; then      # bundle layout
    in_bundle=1 root=$here bin=$here/bin
    export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    default_out=$here/$name
    torch_bench=$here/pytorch_train_step.py
    # The bundle's Open MPI (scripts/gpu-bundle.sh): mpirun in bin/, its components in lib/openmpi/, one node.
    if [ -d "$here/lib/openmpi" ]; then
      export PATH="$here/bin:$PATH"
      export OMPI_MCA_mca_base_component_path="$here/lib/openmpi" OMPI_MCA_plm=isolated
      export OMPI_MCA_ess_singleton_isolated=1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_base_warn_component_unused=0
      [ -d "$here/share/openmpi" ] && export OPAL_PKGDATADIR="$here/share/openmpi"  # its help texts
      if [ -d "$here/lib/pmix" ]; then                                               # an external PMIx's parts
        export PMIX_MCA_mca_base_component_path="$here/lib/pmix" PMIX_PKGDATADIR="$here/share/pmix"
      fi
    fi
  else                                      # repository layout (scripts/ inside the repository)
    in_bundle="" root=$(cd "$here/.." && pwd) bin=$root/build/bin
    default_out=$root/build/$name
    torch_bench=$root/bench/pytorch_train_step.py
  fi
}

# A Python for the PyTorch side: the first candidate whose torch sees a CUDA device, else the first that
# imports torch at all (its SKIP line then says why PyTorch was not measured).
gpu_find_torch_python() {
  local cand
  torch_py=""
  for cand in ${HETRAIN_PYTHON:-} python3 python /usr/bin/python3; do
    command -v "$cand" >/dev/null 2>&1 || continue
    # exit 0: torch sees a GPU; 5: torch without a GPU; anything else: no usable torch
    py timeout -k 5 "${GPU_TORCH_PROBE_TIMEOUT_S:-120}" "$cand" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 5)' >/dev/null 2>&1
    case $? in
      0) torch_py=$cand; break ;;
      5) [ -n "$torch_py" ] || torch_py=$cand ;;
    esac
  done
}

# PyTorch's CUDA libraries, where they exist (pip wheels: <site>/nvidia/<pkg>/lib, cu13/lib, torch/lib), from
# the Python chosen above or else the first one found. <site> is first the folder that holds torch itself
# (found without importing it), then every site folder that Python searches: the system ones
# (site-packages or Debian's dist-packages), the user's (pip install --user) and sysconfig's purelib.
site_dirs_py='
import importlib.util, os, site, sysconfig
dirs = []
try:
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        dirs.append(os.path.dirname(os.path.dirname(spec.origin)))
except Exception:
    pass
for get in (site.getsitepackages, lambda: [site.getusersitepackages()], lambda: [sysconfig.get_paths()["purelib"]]):
    try:
        dirs += list(get())
    except Exception:  # virtualenvs without site.getsitepackages
        pass
seen = set()
for d in dirs:
    if d and d not in seen and os.path.isdir(d):
        seen.add(d)
        print(d)
'
# The libraries ldd cannot find for the given programs; a wheel folder is added only when it holds one of
# them (their CUDA 12 copies must not shadow CUDA 13 ones found already).
gpu_add_wheel_libs() {
  local f wanted cand sites site d lib holds
  wanted=$(for f in "$@"; do [ -x "$f" ] && ldd "$f" 2>&1; done | awk '/not found/ {print $1}' | sort -u)
  if [ -n "$wanted" ]; then
    for cand in ${torch_py:-} python3 python; do
      command -v "$cand" >/dev/null 2>&1 || continue
      sites=$(py "$cand" -c "$site_dirs_py" 2>/dev/null) || continue
      while IFS= read -r site; do
        [ -n "$site" ] || continue
        for d in "$site"/nvidia/*/lib "$site"/torch/lib; do
          [ -d "$d" ] || continue
          holds=""
          for lib in $wanted; do [ -e "$d/$lib" ] && holds=1; done
          [ -n "$holds" ] || continue
          case ":${LD_LIBRARY_PATH-}:" in *":$d:"*) ;; *) LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d" ;; esac
        done
      done <<<"$sites"
      break
    done
  fi
  export LD_LIBRARY_PATH
}

# missing_libs BIN: the libraries ldd reports as not found for BIN, space-separated.
missing_libs() { ldd "$1" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' '; }

gpu_header() {
  echo "$1 $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not found"
  fi
  # Which copy of each GPU library the programs load.
  ldd "$bin/test_gpu" 2>/dev/null | awk '/libcud|libcublas|libnccl/ {print "loaded: " $1 " => " $3}'
}

# gpu_run_tests OUT TIMEOUT [GTEST ARGS...]: test_gpu under timeout, its log in OUT/test_gpu.log and its XML
# in OUT/test_gpu.xml, RESULT lines appended to $HETRAIN_GPU_RESULTS. Sets gt_rc (non-zero: the part
# failed), gt_line ("test_gpu: P passed, F failed, S skipped (exit N)[; skip reason: ...]") and gt_why (why it
# failed, beyond a failed test: no GPU seen, nothing passed, timed out).
gpu_run_tests() {
  local out=$1 limit=$2 p f s nogpu
  shift 2
  timeout -k 10 "$limit" "$bin/test_gpu" --gtest_output="xml:$out/test_gpu.xml" "$@" >"$out/test_gpu.log" 2>&1
  gt_rc=$? gt_why=""
  p=$(grep -E '^\[  PASSED  \] [0-9]+' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
  f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
  s=$(grep -E '^\[  SKIPPED \] [0-9]+' "$out/test_gpu.log" | grep -oE '[0-9]+' | head -1)
  gt_failed=${f:-0}
  gt_line="test_gpu: ${p:-0} passed, ${f:-0} failed, ${s:-0} skipped (exit $gt_rc)"
  [ "${s:-0}" != 0 ] && gt_line+="; skip reason: $(grep -m1 -A1 ': Skipped$' "$out/test_gpu.log" | tail -1)"
  nogpu=$(grep -m1 -oE 'HETRAIN_REQUIRE_GPU=1 but .*' "$out/test_gpu.log")
  if [ $gt_rc -eq 124 ] || [ $gt_rc -eq 137 ]; then
    gt_why="timed out after $limit s"
  elif [ -n "$nogpu" ]; then
    gt_why="asked to check a GPU, but this process sees none (${nogpu#HETRAIN_REQUIRE_GPU=1 but })"
    gt_rc=1
  elif [ "${p:-0}" = 0 ] && [ "${HETRAIN_REQUIRE_GPU:-0}" != 0 ]; then
    gt_why="no GPU test passed"
    gt_rc=1
  fi
}

field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
run_step() {
  local name=$1; shift
  m_line="" m_why=""
  local left=$((budget - (SECONDS - started))) cap=${step_cap:-120}
  [ "$left" -lt "$cap" ] && cap=$left
  if [ "$cap" -lt 20 ]; then m_why="the time budget (${budget} s) is spent"; return; fi
  local t0=$SECONDS o rc
  echo "### $name: $*  (timeout ${cap} s)" >>"$step_log"
  o=$(timeout -k 10 "$cap" "$@" 2>&1); rc=$?
  printf '%s\n### exit %s after %s s\n\n' "$o" "$rc" "$((SECONDS - t0))" >>"$step_log"
  m_line=$(grep -m1 '^impl=' <<<"$o")
  if [ $rc -eq 0 ] && [ -n "$m_line" ]; then return; fi
  m_line=""
  if [ $rc -eq 3 ] && grep -q '^SKIP' <<<"$o"; then m_why=$(grep -m1 '^SKIP' <<<"$o" | sed 's/^SKIP:* *//')
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then m_why="timed out after ${cap} s"
  else m_why="failed (exit $rc): $(grep -v '^\s*$' <<<"$o" | tail -1 | cut -c1-200)"; fi
}

# resnet50 224x224, batch 64, NCHW; fp32, tf32, bf16, fp16. Each configuration runs hetrain, then PyTorch,
# in their own processes (BENCH_WARMUP, BENCH_STEPS, BENCH_MAX_SECONDS). Needs budget, started, step_log and
# a function `report`.
gpu_resnet50_bench() {
  local precision label h_line h_why p_line p_why h_ips p_ips line mem hetrain_why="" torch_why="" hmissing
  local bench_args=(--model resnet50 --size 224 --batch 64 --classes 1000 --device cuda
                    --warmup "${BENCH_WARMUP:-3}" --steps "${BENCH_STEPS:-20}" --max-seconds "${BENCH_MAX_SECONDS:-15}")
  bench_failed=()
  if [ ! -x "$bin/bench_train_step" ]; then
    hetrain_why="$bin/bench_train_step is not built (make build/bin/bench_train_step)"
  else
    hmissing=$(missing_libs "$bin/bench_train_step")
    [ -n "$hmissing" ] && hetrain_why="shared libraries not found: ${hmissing% }"
  fi
  if [ ! -f "$torch_bench" ]; then torch_why="$torch_bench is missing"
  elif [ -z "$torch_py" ]; then torch_why="no PyTorch: no Python here imports torch (set HETRAIN_PYTHON)"
  fi
  for precision in fp32 tf32 bf16 fp16; do
    label="resnet50 224 b64 precision=$precision"
    h_line="" h_why=$hetrain_why p_line="" p_why=$torch_why
    if [ -z "$h_why" ]; then
      run_step "hetrain precision=$precision" "$bin/bench_train_step" "${bench_args[@]}" --precision "$precision"
      h_line=$m_line h_why=$m_why
    fi
    if [ -z "$p_why" ]; then
      run_step "pytorch precision=$precision" env LD_LIBRARY_PATH="$orig_ld_path" "$torch_py" "$torch_bench" \
        "${bench_args[@]}" --precision "$precision"
      p_line=$m_line p_why=$m_why
    fi
    h_ips=$(field samples_per_s "$h_line") p_ips=$(field samples_per_s "$p_line")
    line="$label: "
    if [ -n "$h_ips" ]; then line+="hetrain $(printf '%.1f' "$h_ips") img/s, "
    else line+="hetrain not measured: $h_why, "; bench_failed+=("benchmark $precision ($h_why)"); fi
    if [ -n "$p_ips" ]; then line+="PyTorch $(printf '%.1f' "$p_ips") img/s"; else line+="PyTorch not measured: $p_why"; fi
    if [ -n "$h_ips" ] && [ -n "$p_ips" ]; then
      line+=", ratio $(awk "BEGIN { printf \"%.2f\", $h_ips / $p_ips }")"
    fi
    mem=""
    [ -n "$h_line" ] && mem+=" hetrain $(field dev_mem_mb "$h_line") MB"
    [ -n "$p_line" ] && mem+="${mem:+,} PyTorch $(field dev_mem_mb "$p_line") MB"
    [ -n "$mem" ] && line+=" (GPU memory in use after the steps:$mem)"
    report "$line"
  done
  bench_note=""
  [ -n "$h_line$p_line" ] && bench_note="  (ratio = hetrain / PyTorch, > 1: hetrain faster; PyTorch: $(field impl "${p_line:-impl=-}"), python $torch_py; raw lines in $step_log)"
  return 0
}

# gpu_parity_table RESULTS LOG: one line per test of test_gpu's LOG, with its status and, from its "RESULT
# parity" lines in RESULTS (test/gpu/gpu_test_util.hpp), the number of comparisons with the CPU twin, the
# largest |GPU - CPU|, the largest relative difference and the worst share of the tolerance (and of which
# comparison). Every conditional inside print(f) is parenthesised: mawk reads a bare > there as a redirection.
gpu_parity_table() {
  awk '
    FNR == NR {
      if ($1 != "RESULT" || $2 != "parity") next
      t = ""; w = ""
      for (i = 3; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[1] == "test") t = kv[2]
        else if (kv[1] == "max_abs" && kv[2] + 0 > abs[t] + 0) abs[t] = kv[2]
        else if (kv[1] == "max_rel" && kv[2] + 0 > rl[t] + 0) rl[t] = kv[2]
        else if (kv[1] == "tol_frac") { f = (kv[2] == "inf") ? 1e300 : kv[2] + 0
          if (!(t in frac) || f > frac[t]) { frac[t] = f; match($0, /what="[^"]*"/); worst[t] = substr($0, RSTART + 5, RLENGTH - 5) } }
      }
      n[t]++
      next
    }
    / \([0-9]+ ms\)$/ && /^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z]/ {
      st = ($2 == "OK") ? "passed" : $2
      t = $4
      if (t in n) printf "  %-7s %s: %d comparisons with the CPU twin, max |gpu-cpu| %s, max rel %s, worst %s of the tolerance (%s)\n", st, t, n[t], abs[t] + 0, rl[t] + 0, (frac[t] >= 1e300 ? "inf" : frac[t]), worst[t]
      else printf "  %-7s %s: no CPU-twin figures (checks behaviour)\n", st, t
    }' "$1" "$2"
}
