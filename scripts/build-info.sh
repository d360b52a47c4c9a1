#!/usr/bin/env bash
# Prints what `hetrain --version` reports, one value a line (the Makefile turns them into the macros
# HETRAIN_VERSION, HETRAIN_GIT and HETRAIN_BUILD_CONFIG of src/apps/hetrain_main.cpp):
#   1  the release, from the file VERSION at the repository root ("unknown" without it)
#   2  `git describe --always --dirty` of this repository ("unknown" outside a git checkout)
#   3  the build configuration: "cuda=yes|no mpi=... hdf5=... blas=... onednn=VERSION|no"
#
#   scripts/build-info.sh MPICXX USE_CUDA HDF5_HOME HDF5_PC BLAS_HOME BLAS_KIND HAVE_DNNL DNNL_HOME
#
# Values never hold quotes, backslashes or newlines, so they can sit inside a C string literal.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
mpicxx=${1:-} use_cuda=${2:-} hdf5_home=${3:-} hdf5_pc=${4:-} blas_home=${5:-} blas_kind=${6:-} have_dnnl=${7:-} dnnl_home=${8:-}

# clean TEXT: one line, no characters that would end or escape a C string; runs of spaces become one.
clean() { printf '%s' "$1" | tr -d '"\\`\r' | tr '\n\t' '  ' | tr -s ' ' | sed 's/^ //; s/ $//'; }
# word TEXT: like clean, with spaces turned into '-' (the configuration line separates fields by spaces).
word() { local w; w=$(clean "$1"); printf '%s' "${w// /-}"; }

version=$(head -n 1 "$root/VERSION" 2>/dev/null)
version=$(clean "${version:-unknown}")

git=unknown
if command -v git >/dev/null 2>&1; then
  # Only this repository's own history: a source tree unpacked inside another checkout is "unknown".
  top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null) || top=
  if [ -n "$top" ] && [ "$(cd "$top" && pwd -P)" = "$root" ]; then
    git=$(git -C "$root" describe --always --dirty 2>/dev/null) || git=unknown
  fi
fi
git=$(word "${git:-unknown}")

# MPI: Open MPI's wrapper names itself (--showme:version); MPICH's first line of -v does; else the wrapper.
mpi=
if [ -n "$mpicxx" ]; then
  mpi=$("$mpicxx" --showme:version 2>/dev/null | head -n 1 | sed -E 's/^[^:]*: *//; s/ *\(Language:.*\)$//; s/^Open MPI /OpenMPI-/')
  if [ -z "$mpi" ]; then
    mpi=$("$mpicxx" -v 2>&1 </dev/null | head -n 1 | sed -nE 's/.*(MPICH|Intel\(R\) MPI Library)[^0-9]*([0-9][0-9.a-z]*).*/\1-\2/p' | sed 's/Intel(R) MPI Library/IntelMPI/')
  fi
  [ -n "$mpi" ] || mpi=$(basename "$mpicxx")
fi
mpi=$(word "${mpi:-none}")

# HDF5: the pkg-config package and its version, or the version in HDF5_HOME's headers and that prefix.
if [ -n "$hdf5_home" ]; then
  h=$hdf5_home/include/H5public.h
  v=$(awk '/#define H5_VERS_(MAJOR|MINOR|RELEASE)[ \t]/ { v = v (v == "" ? "" : ".") $3 } END { print v }' "$h" 2>/dev/null)
  hdf5="hdf5/${v:-unknown}@$hdf5_home"
elif [ -n "$hdf5_pc" ]; then
  hdf5="$hdf5_pc/$(pkg-config --modversion "$hdf5_pc" 2>/dev/null || echo unknown)"
else
  hdf5=none
fi
hdf5=$(word "$hdf5")

# BLAS: which OpenBLAS the Makefile links.
if [ -n "$blas_home" ]; then
  blas="openblas@$blas_home"
elif [[ "$blas_kind" == OpenMP* ]]; then
  blas=openblas-openmp
else
  blas=openblas-pthread
fi
blas=$(word "$blas")

# oneDNN: the version in the headers the build used, or "no".
onednn=no
if [ -n "$have_dnnl" ]; then
  inc=${dnnl_home:-/usr}/include
  onednn=$(cat "$inc/oneapi/dnnl/dnnl_version.h" "$inc/dnnl_version.h" 2>/dev/null |
    awk '/#define DNNL_VERSION_(MAJOR|MINOR|PATCH)[ \t]/ && !seen[$2]++ { v = v (v == "" ? "" : ".") $3 } END { print v }')
  onednn=$(word "${onednn:-yes}")
fi

printf '%s\n%s\n%s\n' "$version" "$git" \
  "cuda=$([ -n "$use_cuda" ] && echo yes || echo no) mpi=$mpi hdf5=$hdf5 blas=$blas onednn=$onednn"
