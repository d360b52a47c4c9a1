#!/usr/bin/env bash
# Packs the GPU test binary, the training-step benchmark and the shared libraries they need into one folder
# that runs on a bare Linux machine with an NVIDIA GPU (no MPI, HDF5, Boost or package registry there).
#
#   scripts/gpu-bundle.sh [--archive] [DEST]   (default build/gpu-bundle)
#
# --archive also writes DEST.tar.xz (about a fifth of the folder's size), one file to copy to the GPU
# machine: there `tar -xJf gpu-bundle.tar.xz && gpu-bundle/gpu-first-run.sh OUTDIR`.
#
# DEST/bin/test_gpu          the binary (build it first: make CUDA=1 build/bin/test_gpu)
# DEST/lib/                  every library ldd lists except the C library basics, the compiler's C++ runtime
#                            and the CUDA libraries: cuDNN, cuBLAS(Lt), NCCL and the CUDA runtime come from
#                            LD_LIBRARY_PATH on the GPU machine (for instance PyTorch's nvidia/*/lib folders),
#                            where the driver matches; libstdc++.so.6 and libgcc_s.so.1 come from its system
#                            (see below)
# DEST/bin/bench_train_step  when built (make build/bin/bench_train_step, same configuration): the
#                            benchmark; whatever else ldd lists for it goes into lib/ like the rest
# DEST/pytorch_train_step.py the PyTorch side of the benchmark (needs a Python with torch on the GPU machine)
# DEST/gpu-check.sh          the runner (scripts/gpu-check.sh); it finds lib/ beside itself
# DEST/gpu-first-run.sh      the first run's script (scripts/gpu-first-run.sh), and gpu-lib.sh which both source
# DEST/bin/hetrain           when it is a CUDA build (make CUDA=1 build/bin/hetrain), with models/yolov5n.yaml;
#                            its libraries (MPI, HDF5, Boost, ...) go into lib/ like the rest
# DEST/bin/mpirun, DEST/lib/openmpi/   Open MPI's launcher and components (with their libraries in lib/), when
#                            this host has Open MPI: gpu-lib.sh points Open MPI at them for one node
# DEST/share/openmpi/, DEST/lib/pmix/, DEST/share/pmix/   Open MPI's help texts, and an external PMIx's
#                            components and help texts, which gpu-lib.sh points them at too
set -euo pipefail
cd "$(dirname "$0")/.."
archive=""
[ "${1:-}" = --archive ] && { archive=1; shift; }
dest=${1:-build/gpu-bundle}
bins=(build/bin/test_gpu)
[ -x build/bin/test_gpu ] || { echo "gpu-bundle: build/bin/test_gpu is missing: run make CUDA=1 build/bin/test_gpu" >&2; exit 1; }
if [[ "$(ldd build/bin/test_gpu)" != *libcudart* ]]; then
  echo "gpu-bundle: build/bin/test_gpu is a CPU-only build (no libcudart): rebuild it with CUDA=1" >&2
  exit 1
fi
# add_if_cuda PROGRAM WITHOUT_IT: PROGRAM joins the bundle only when it is a CUDA build too (build/bin holds
# the configuration built last); otherwise a note says so and what the bundle then cannot do.
add_if_cuda() {
  if [ ! -x "$1" ]; then
    echo "gpu-bundle: note: $1 is not built: $2" >&2
  elif [[ "$(ldd "$1")" != *libcudart* ]]; then
    echo "gpu-bundle: note: $1 is a CPU-only build (no libcudart): left out; rebuild it with CUDA=1" >&2
  else
    bins+=("$1")
  fi
}
add_if_cuda build/bin/bench_train_step "the bundle's gpu-check will not measure hetrain's step"
add_if_cuda build/bin/hetrain "the bundle's gpu-first-run will not train"
# Open MPI's launcher (orterun) and its components (dlopened at run time, so ldd of the programs misses them).
# Its help texts (pkgdatadir) let it say why a launch failed instead of "Sorry! You were supposed to get help".
mpirun_bin=$(readlink -f "$(command -v mpirun 2>/dev/null)" 2>/dev/null || true)
ompi_path() { { ompi_info --path "$1" --parsable 2>/dev/null || true; } | sed -n "s/^path:$1://p"; }
ompi_components=$(ompi_path pkglibdir)
ompi_help=$(ompi_path pkgdatadir)

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
# Libraries that every Linux has (and must match its own loader) or that must come from the GPU machine.
# libstdc++.so.6 and libgcc_s.so.1 belong to the first group: this build host's copies need its glibc (2.36
# on Debian 12), newer than Ubuntu 22.04's (2.35) or RHEL 9's (2.34), so bundled they stop the loader there,
# for cuDNN and NCCL too, which load them as well. The GPU machine's own copies serve everyone; the check at
# the end says which versions the bundle's files ask of them.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|librt\.so|libpthread\.so|libresolv\.so|libutil\.so|libstdc\+\+\.so|libgcc_s\.so|libcudnn|libcublas|libnccl|libcudart|libcuda\.so|libnvrtc|libnvJitLink)'
# copy_libs_of FILE: every library ldd lists for FILE, except those above, into lib/ under its soname.
copy_libs_of() {
  # "libfoo.so.1 => /path/libfoo.so.1 (0x...)": copy the file behind any symlink, under the soname.
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r soname path; do
    if [[ "$soname" =~ $skip ]]; then continue; fi
    [ -e "$dest/lib/$soname" ] || cp -L "$path" "$dest/lib/$soname"
  done
}
for b in "${bins[@]}"; do
  cp "$b" "$dest/bin/"
  copy_libs_of "$b"
done
if [[ " ${bins[*]} " == *" build/bin/hetrain "* ]] && [ -x "$mpirun_bin" ] && [ -d "$ompi_components" ]; then
  cp "$mpirun_bin" "$dest/bin/mpirun"
  mkdir -p "$dest/lib/openmpi"
  cp -L "$ompi_components"/*.so "$dest/lib/openmpi/"
  [ -d "$ompi_help" ] && mkdir -p "$dest/share" && cp -r "$ompi_help" "$dest/share/openmpi"
  # An external PMIx (Debian's, for one) loads components and help texts from its own prefix, the folder
  # above the lib/ that holds libpmix: without them every launch warns that "pcompress" is unavailable.
  pmix_lib=$(ldd "$mpirun_bin" "$ompi_components"/*.so 2>/dev/null | awk '$1 ~ /^libpmix\.so/ && $3 ~ /^\// && !p {p = $3} END {print p}')
  pmix_prefix=""
  [ -n "$pmix_lib" ] && pmix_prefix=$(dirname "$(dirname "$(readlink -f "$pmix_lib")")")
  if [ -n "$pmix_prefix" ] && [ -d "$pmix_prefix/lib/pmix" ]; then
    cp -rL "$pmix_prefix/lib/pmix" "$dest/lib/pmix"
    [ -d "$pmix_prefix/share/pmix" ] && mkdir -p "$dest/share" && cp -r "$pmix_prefix/share/pmix" "$dest/share/pmix"
  fi
  for f in "$dest/bin/mpirun" "$dest"/lib/openmpi/*.so "$dest"/lib/pmix/*.so; do
    [ -e "$f" ] && copy_libs_of "$f"
  done
elif [[ " ${bins[*]} " == *" build/bin/hetrain "* ]]; then
  echo "gpu-bundle: note: no Open MPI here (mpirun, ompi_info): the bundle's mixed CPU+GPU parts will not run" >&2
fi
# What the bundle asks of the GPU machine's C library and C++ runtime: the newest symbol versions any of its
# files needs. RHEL 9 offers glibc 2.34 and GLIBCXX_3.4.29 (GCC 11); Ubuntu 22.04 glibc 2.35 and 3.4.30.
newest() { objdump -T "$dest"/bin/* "$dest"/lib/* "$dest"/lib/openmpi/* "$dest"/lib/pmix/* 2>/dev/null | grep -oE "\b$1_[0-9.]+" | sort -uV | tail -1 || true; }
need_glibc=$(newest GLIBC) need_glibcxx=$(newest GLIBCXX)
if [ "$(printf '%s\n' "${need_glibc#GLIBC_}" 2.34 | sort -V | tail -1)" != 2.34 ] ||
   [ "$(printf '%s\n' "${need_glibcxx#GLIBCXX_}" 3.4.29 | sort -V | tail -1)" != 3.4.29 ]; then
  echo "gpu-bundle: warning: the bundle needs $need_glibc and $need_glibcxx, newer than RHEL 9's (GLIBC_2.34, GLIBCXX_3.4.29)" >&2
fi
cp scripts/gpu-check.sh "$dest/gpu-check.sh"
cp scripts/gpu-first-run.sh "$dest/gpu-first-run.sh"
cp scripts/gpu-lib.sh "$dest/gpu-lib.sh"
mkdir -p "$dest/models"
cp models/yolov5n.yaml "$dest/models/"
cp bench/pytorch_train_step.py "$dest/pytorch_train_step.py"
chmod +x "$dest/gpu-check.sh" "$dest/gpu-first-run.sh" "$dest/pytorch_train_step.py"
{
  echo "hetrain GPU bundle, built $(date -u +%Y-%m-%dT%H:%MZ) on $(hostname)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "needs from LD_LIBRARY_PATH: libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2"
  echo "needs from the system: glibc with ${need_glibc:-?}, libstdc++.so.6 with ${need_glibcxx:-?}, libgcc_s.so.1"
  echo "programs: $(cd "$dest/bin" && echo *)"
  echo "PyTorch side of the benchmark: pytorch_train_step.py with the first python3 whose torch sees a GPU (HETRAIN_PYTHON to choose)"
  echo "Open MPI for the mixed CPU+GPU parts: $([ -x "$dest/bin/mpirun" ] && echo "bin/mpirun, lib/openmpi/ (one node)" || echo "none")"
  echo "run: ./gpu-first-run.sh OUTDIR  (the first run, 9 minutes), ./gpu-check.sh OUTDIR"
} >"$dest/BUNDLE.txt"
echo "gpu-bundle: $dest ($(ls "$dest/lib" | wc -l) libraries, $(du -sh "$dest" | cut -f1))"
if [ -n "$archive" ]; then
  # Under a temporary name, renamed when whole: an archive that looks complete is complete.
  parent=$(dirname "$dest") name=$(basename "$dest")
  tar -C "$parent" -cf - "$name" | xz -T0 -6 >"$dest.tar.xz.tmp-$$" && mv "$dest.tar.xz.tmp-$$" "$dest.tar.xz" \
    || { rm -f "$dest.tar.xz.tmp-$$"; echo "gpu-bundle: writing $dest.tar.xz failed" >&2; exit 1; }
  echo "gpu-bundle: $dest.tar.xz ($(du -h "$dest.tar.xz" | cut -f1)); on the GPU machine: tar -xJf $name.tar.xz && $name/gpu-first-run.sh OUTDIR"
fi
