#!/usr/bin/env bash
# Installs the Debian packages hetrain needs. Idempotent: installs only what is missing.
# Everything `make test` and `make demo` use is installed, the Python side (numpy, h5py, PyTorch: the
# dataset and checkpoint tests read files with h5py and load exported models into PyTorch) included.
# Usage: scripts/install-deps.sh [--with-python]   (accepted for older scripts; Python is always installed)
set -euo pipefail

core=(build-essential pkg-config libopenmpi-dev openmpi-bin libhdf5-openmpi-dev libhdf5-dev hdf5-tools
      libboost-program-options-dev libboost-context-dev libopenblas-dev libopenblas0-openmp libdnnl-dev zlib1g-dev libturbojpeg0-dev libpng-dev nlohmann-json3-dev libyaml-cpp-dev
      libgtest-dev libbenchmark-dev dataset-fashion-mnist python3 python3-numpy python3-h5py python3-torch python3-torchvision python3-matplotlib python3-pil python3-yaml
      slurmctld slurmd slurm-client munge lua5.4)
extra=()
for arg in "$@"; do
  case "$arg" in
    --with-python) ;;
    *) echo "install-deps: unknown option '$arg' (only --with-python is known)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${core[@]}" "${extra[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#core[@]} required packages already installed"
  exit 0
fi
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps: not root and no sudo; ask an administrator to run: apt-get install ${missing[*]}" >&2
    exit 1
  fi
else SUDO=""; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
