#!/usr/bin/env bash
# compare-builds.sh OLD_HETRAIN [NEW_HETRAIN]: whether two builds of hetrain train the same parameters, bit
# for bit, in the synchronous mode: lenet and resnet20 on synthetic data, 1 and 4 ranks, the uniform split
# (--balance none) and a fixed uneven one (--split). For changes that must not change the math (a
# refactoring): build the previous commit, keep its build/bin/hetrain, build the change, run this.
# NEW_HETRAIN defaults to build/bin/hetrain. Exit 0 when every run matches; one line per run either way.
set -uo pipefail
old=${1:?usage: scripts/compare-builds.sh OLD_HETRAIN [NEW_HETRAIN]}
new=${2:-$(dirname "$0")/../build/bin/hetrain}
for b in "$old" "$new"; do [ -x "$b" ] || { echo "compare-builds: $b: not an executable" >&2; exit 2; }; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run NAME RANKS ARGS...: trains with both builds and compares rank 0's parameters
failed=0
run() {
  local name=$1 ranks=$2; shift 2
  local b tag
  for tag in old new; do
    [ $tag = old ] && b=$old || b=$new
    if ! timeout 600 mpirun -n "$ranks" "$b" train "$@" --device cpu --quiet --dump-params "$tmp/$tag.bin" \
        >"$tmp/$tag.log" 2>&1; then
      echo "FAIL $name: the $tag build's run failed:"; tail -5 "$tmp/$tag.log"; failed=1; return
    fi
  done
  if cmp -s "$tmp/old.bin" "$tmp/new.bin"; then
    echo "same $name ($(stat -c %s "$tmp/new.bin") bytes of parameters)"
  else
    echo "DIFFERENT $name"; failed=1
  fi
}
LENET=(--model lenet --synthetic 1024 --synthetic-shape 1,28,28 --global-batch 64 --epochs 1 --lr 0.05 --augment)
RESNET=(--model resnet20 --synthetic 256 --synthetic-shape 3,32,32 --global-batch 64 --epochs 1 --lr 0.05 --augment)
run "lenet, 1 rank" 1 "${LENET[@]}"
run "lenet, 4 ranks, --balance none" 4 "${LENET[@]}" --balance none
run "lenet, 4 ranks, --split 5,0,27,32" 4 "${LENET[@]}" --split 5,0,27,32
run "resnet20, 1 rank" 1 "${RESNET[@]}"
run "resnet20, 4 ranks, --balance none" 4 "${RESNET[@]}" --balance none
run "resnet20, 4 ranks, --split 5,3,24,32" 4 "${RESNET[@]}" --split 5,3,24,32
exit $failed
