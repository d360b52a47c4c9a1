#!/usr/bin/env bash
# The GPU bundle (scripts/gpu-bundle.sh --archive, unpacked in another folder) must run on a machine without
# Open MPI, PMIx or HDF5: a first GPU session is short and has no package registry. Here those are hidden in
# a private mount namespace (an empty folder mounted over each of their folders, an empty file over a
# library among the system's), and the bundle's own mpirun must start 2 ranks of its hetrain on the CPU,
# with no help text missing, and must explain a failed launch in Open MPI's own words (its help texts
# travel too). The CUDA libraries are not the bundle's (they come from the GPU machine) and stay
# visible. Skipped without root (a mount namespace), without a CUDA build or without Open MPI.
source "$(dirname "$0")/lib.sh"
[ -x "$HETRAIN" ] || fail "$HETRAIN is missing: run make"
[[ "$(ldd build/bin/test_gpu 2>/dev/null)" == *libcudart* ]] || skip "build/bin/test_gpu is not a CUDA build"
[[ "$(ldd "$HETRAIN")" == *libcudart* ]] || skip "$HETRAIN is not a CUDA build"
command -v ompi_info >/dev/null || skip "no Open MPI here (ompi_info): the bundle would carry no mpirun"
unshare -m true 2>/dev/null || skip "no private mount namespace here (unshare -m needs root)"

# Made as an archive and unpacked elsewhere, as it travels to a GPU machine: nothing may depend on where it
# was made.
scripts/gpu-bundle.sh --archive "$TMP/made/gpu-bundle" >"$TMP/bundle.log" 2>&1 \
  || { cat "$TMP/bundle.log"; fail "gpu-bundle.sh --archive failed"; }
[ -f "$TMP/made/gpu-bundle.tar.xz" ] || fail "no gpu-bundle.tar.xz"
ls "$TMP/made"/*.tmp-* >/dev/null 2>&1 && fail "a temporary archive was left beside it"
mkdir "$TMP/unpacked"
tar -C "$TMP/unpacked" -xJf "$TMP/made/gpu-bundle.tar.xz" || fail "the archive does not unpack"
archive_size=$(du -h "$TMP/made/gpu-bundle.tar.xz" | cut -f1)
rm -rf "$TMP/made"
mv "$TMP/unpacked/gpu-bundle" "$TMP/bundle"
[ -x "$TMP/bundle/bin/mpirun" ] || fail "the bundle carries no mpirun although Open MPI is here"

# What to hide: Open MPI's libraries, components, help texts and settings; PMIx's prefix; HDF5's library.
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
hide=("$(ompi_path libdir)" "$(ompi_path pkglibdir)" "$(ompi_path pkgdatadir)" "$(ompi_path sysconfdir)")
pmix=$(ldd "$(ompi_path pkglibdir)"/*.so 2>/dev/null | awk '$1 ~ /^libpmix\.so/ && $3 ~ /^\// && !p {p = $3} END {print p}')
[ -n "$pmix" ] && hide+=("$(dirname "$(dirname "$(readlink -f "$pmix")")")")
hdf5=$(ldd "$HETRAIN" | awk '$1 ~ /^libhdf5/ && $3 ~ /^\// && !p {p = $3} END {print p}')
[ -n "$hdf5" ] && hide+=("$(readlink -f "$hdf5")")  # a file among the system's libraries: hidden alone

# Runs inside the bundle (gpu_layout finds the bundle from the caller's folder) with the folders hidden.
cat >"$TMP/bundle/hidden-check.sh" <<'EOF'
set -uo pipefail
for d in "$@"; do
  if [ -d "$d" ]; then mount -t tmpfs hidden "$d"; elif [ -f "$d" ]; then mount --bind /dev/null "$d"; fi
done
source "$(dirname "$0")/gpu-lib.sh"
gpu_layout hidden-check
cd "$(dirname "$0")"
echo "### hidden: $*"
for b in bin/*; do echo "### ldd $b"; ldd "$b"; done
echo "### train"
timeout 120 mpirun -n 2 bin/hetrain train --model mlp --synthetic 512 --synthetic-shape 1,8,8 --global-batch 32 \
  --max-steps 4 --log-every 2 --device cpu --threads 1 2>&1
echo "### train exit $?"
echo "### bad launch"
timeout 60 mpirun -n 2 ./no-such-program 2>&1
echo "### bad launch exit $?"
EOF
unshare -m bash "$TMP/bundle/hidden-check.sh" "${hide[@]}" >"$TMP/check.log" 2>&1
log=$TMP/check.log
# section TITLE: the log's lines from "### TITLE" to the next "### " line.
section() { awk -v h="### $1" 'index($0, h) == 1 {on = 1; next} /^### / {on = 0} on' "$log"; }

grep -q "^### hidden: " "$log" || { cat "$log"; fail "the check did not start in the mount namespace"; }
missing=$(grep 'not found' "$log" | grep -vE 'libcud|libcublas|libnccl' || true)
[ -z "$missing" ] || { cat "$log"; fail "the bundle lacks libraries once Open MPI/PMIx/HDF5 are hidden: $missing"; }
for lib in libmpi.so libhdf5 libboost_program_options; do
  where=$(section "ldd bin/hetrain" | awk -v l="$lib" 'index($1, l) == 1 {print $3}' | head -1)
  [[ "$where" == "$TMP/bundle/lib/"* ]] || { cat "$log"; fail "hetrain loads $lib from '$where', not the bundle"; }
done
grep -q "^### train exit 0$" "$log" || { cat "$log"; fail "2 CPU ranks under the bundle's mpirun did not train"; }
section train | grep -q "^done: 4 steps" || { cat "$log"; fail "no 'done: 4 steps' line from the bundle's hetrain"; }
if grep -q "Sorry!  You were supposed to get help" "$log"; then
  grep -B2 -A4 "Sorry!" "$log" | head -20
  fail "Open MPI or PMIx could not find a help text in the bundle"
fi
section "bad launch" | grep -q "unable to launch the specified application" ||
  { cat "$log"; fail "a failed launch was not explained in Open MPI's words"; }
grep -q "^### bad launch exit 0$" "$log" && { cat "$log"; fail "a launch of a missing program exited 0"; }
echo "hidden: ${hide[*]}; bundle $(du -sh "$TMP/bundle" | cut -f1), archive $archive_size"
pass "the bundle's mpirun trains 2 CPU ranks and explains a failed launch without the host's Open MPI, PMIx or HDF5"
