#!/usr/bin/env bash
# Installs what is missing, builds everything and runs the [cpu] tests (and, on a machine with a GPU, the [gpu] tests),
# plus the downstream checks (ctest: a shared install found with find_package, and add_subdirectory).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh
build=${BUILD_DIR:-build}
cmake --preset default -B "$build" >/dev/null  # CMakePresets.json
cmake --build "$build" -j"$(nproc)"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
labels=cpu
if nvidia-smi -L >/dev/null 2>&1; then
  labels='cpu|gpu'
  if [ -n "${ARFUSE_NCCL_LIBRARY:-}" ] || ldconfig -p | grep -q 'libnccl\.so\.2'; then
    labels='cpu|gpu|nccl'
  else
    echo "NOT RUN: the [gpu][nccl] tests (no libnccl.so.2 found; set ARFUSE_NCCL_LIBRARY to run them)"
  fi
fi
ctest --test-dir "$build" --output-on-failure -L "$labels"
