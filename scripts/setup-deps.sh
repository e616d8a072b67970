#!/usr/bin/env bash
# Installs the Debian 12 packages arfuse builds and tests with (skips what is there).
set -euo pipefail
packages=(cmake g++ make libfmt-dev nlohmann-json3-dev catch2 libamdhip64-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  # A machine without a package registry (the GPU machine brings its own in .devdeps/) goes on;
  # the build then says what is missing.
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "warning: could not install ${missing[*]} with apt-get" >&2
  fi
fi
if ! ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1 && ! ldconfig -p | grep -q libnvrtc; then
  echo "warning: NVRTC (the CUDA toolkit) was not found; NVIDIA compiles will report it unavailable" >&2
fi
