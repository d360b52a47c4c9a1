#!/usr/bin/env bash
# Writes the Lmod module file (Lua) of a hetrain installed under PREFIX to standard output. `make install`
# puts it at PREFIX/share/modulefiles/hetrain/VERSION.lua; users then run
#   module use PREFIX/share/modulefiles
#   module load hetrain            (or hetrain/VERSION)
#
#   scripts/make-modulefile.sh PREFIX VERSION
#
# The file loads no other module (no depends_on, no site module names): the binaries find the MPI, HDF5
# and BLAS libraries they were linked against by themselves (system paths, or the rpath the Makefile sets
# for MPI_HOME/HDF5_HOME/BLAS_HOME/CUDA_HOME).
set -euo pipefail
if [ $# -ne 2 ] || [ -z "$1" ] || [ -z "$2" ]; then
  echo "usage: scripts/make-modulefile.sh PREFIX VERSION" >&2
  exit 2
fi
prefix=$1 version=$2
case "$prefix" in /*) ;; *) echo "make-modulefile.sh: PREFIX must be an absolute path (got '$prefix')" >&2; exit 2 ;; esac
# A Lua string literal between double quotes: backslashes and quotes escaped, no newlines.
lua_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}
# The help text sits in a long bracket [==[ ... ]==]; a prefix holding "]==]" would end it early.
help_prefix=${prefix//]==]/]=]}

cat <<EOF
-- hetrain $version, installed under $prefix.
-- Written by \`make install\` (scripts/make-modulefile.sh); regenerate it rather than editing it.
-- Use:  module use $prefix/share/modulefiles && module load hetrain/$version

local root = $(lua_str "$prefix")
local version = $(lua_str "$version")

whatis("Name: hetrain")
whatis("Version: " .. version)
whatis("Category: machine learning, MPI")
whatis("Description: data-parallel training of convolutional networks on clusters whose GPUs are not alike")
whatis("URL: file://" .. root .. "/share/doc/hetrain/README.md")

help([==[
hetrain $version: data-parallel training of convolutional networks with MPI; each rank gets a share of
every global batch that fits its measured speed.

This module sets
  PATH           += $help_prefix/bin   (hetrain, hetrain-pack)
  HETRAIN_ROOT    = $help_prefix
  HETRAIN_TOOLS   = $help_prefix/share/hetrain/tools   (Python tools: hetrain_to_torch.py, ...)
  HETRAIN         = $help_prefix/bin/hetrain   (the binary train.sbatch and hetjob.sbatch run)
  HETRAIN_PACK    = $help_prefix/bin/hetrain-pack   (the binary pack.sbatch runs)

Examples
  hetrain train --help
  mpirun -n 4 hetrain train --model lenet --synthetic 2048 --global-batch 256 --epochs 1
  sbatch -N 2 --ntasks-per-node=4 \$HETRAIN_ROOT/share/hetrain/jobs/train.sbatch --data train.h5 --model resnet20
  /usr/bin/python3 \$HETRAIN_TOOLS/hetrain_to_torch.py checkpoint.h5 -o model.pt

Run it with the mpirun (or srun) of the MPI it was built with; \`hetrain --version\` names that MPI.
Documentation: $help_prefix/share/doc/hetrain
]==])

setenv("HETRAIN_ROOT", root)
setenv("HETRAIN_TOOLS", root .. "/share/hetrain/tools")
setenv("HETRAIN", root .. "/bin/hetrain")
setenv("HETRAIN_PACK", root .. "/bin/hetrain-pack")
prepend_path("PATH", root .. "/bin")
EOF
