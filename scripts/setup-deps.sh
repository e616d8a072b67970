#!/usr/bin/env bash
# Installs the Debian 12 packages arfuse builds and tests with (skips what is there), and a
# clang with the AMDGPU back end in .deps/ for the AMD targets Debian's hiprtc 5.2 does not know.
set -euo pipefail
cd "$(dirname "$0")/.."
# clang and libclang-rt-14-dev: libFuzzer for scripts/fuzz.sh.
packages=(cmake g++ make libfmt-dev nlohmann-json3-dev catch2 libamdhip64-dev python3-pip python3-venv clang-format clang
          libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  # A machine without a package registry goes on (its packages may come another way, see
  # scripts/gpu-run.sh --debs); the build then says what is missing.
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
    echo "warning: could not install ${missing[*]} with apt-get" >&2
  fi
fi
if ! ls /usr/local/cuda/lib64/libnvrtc.so* >/dev/null 2>&1 && ! ldconfig -p | grep -q libnvrtc; then
  echo "warning: NVRTC (the CUDA toolkit) was not found; NVIDIA compiles will report it unavailable" >&2
fi

# PyPI's ziglang wheel carries clang and LLD with the AMDGPU back end (gfx942, gfx950, gfx11,
# gfx12). It is unpacked into .deps/ (ignored by git), never into the system Python; the build
# records .deps/ziglang/zig as the clang back end's default (ARFUSE_AMD_CLANG overrides).
zig_version=0.17.1
if [ ! -x .deps/ziglang/zig ] || [ "$(.deps/ziglang/zig version 2>/dev/null)" != "$zig_version" ]; then
  echo "installing: ziglang $zig_version (clang for AMD targets) into .deps/"
  rm -rf .deps/ziglang .deps/wheels
  if python3 -m pip download --quiet --no-deps --only-binary=:all: -d .deps/wheels "ziglang==$zig_version" &&
     python3 -m zipfile -e .deps/wheels/ziglang-*.whl .deps/ && chmod +x .deps/ziglang/zig; then
    rm -rf .deps/wheels
  else
    echo "warning: could not install ziglang from PyPI; AMD targets hiprtc does not know will report no compiler" >&2
  fi
fi
