#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, and warm the kernel cache
# with the default set (targets: the local GPUs, else sm_90). Extra arguments go to
# arfuse-warmup (e.g. --target gfx90a --jobs 8).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh
cmake --preset default >/dev/null  # build/, CMakePresets.json
cmake --build build -j"$(nproc)" --target arfuse-warmup arfuse-cache
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
args=("$@")
case " $* " in
  *" --target"*|*" --config"*) ;;
  *) nvidia-smi -L >/dev/null 2>&1 || args+=(--target sm_90) ;;
esac
build/tools/arfuse-warmup "${args[@]}"
