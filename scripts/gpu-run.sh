#!/usr/bin/env bash
# On a machine with a GPU: build everything, tests included, into build-gpu/ and warm the
# default set. scripts/gpu-suites.sh and scripts/gpu-bench.sh source it first; source it yourself
# to run single tests with the environment it sets (ARFUSE_CACHE_DIR, LD_LIBRARY_PATH,
# ARFUSE_NCCL_LIBRARY).
# ARFUSE_DEBS=DIR: a folder of the build dependencies' Debian packages (fmt, nlohmann-json,
# Catch2), unpacked into build-gpu/deps, for a machine without a package registry.
# ARFUSE_LOG_DIR (default gpu-logs/): where the logs go.
# Usage: source scripts/gpu-run.sh
set -o pipefail
ARFUSE_LOG_DIR=${ARFUSE_LOG_DIR:-$PWD/gpu-logs}
mkdir -p "$ARFUSE_LOG_DIR" build-gpu
prefix=()
if [ -n "${ARFUSE_DEBS:-}" ]; then
  for f in "$ARFUSE_DEBS"/*.deb; do dpkg -x "$f" build-gpu/deps; done
  export ARFUSE_DEPS_PREFIX=$PWD/build-gpu/deps/usr
  export LD_LIBRARY_PATH=$ARFUSE_DEPS_PREFIX/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  prefix=(-DCMAKE_PREFIX_PATH="$ARFUSE_DEPS_PREFIX")
fi
export ARFUSE_CACHE_DIR=${ARFUSE_CACHE_DIR:-$PWD/build-gpu/cache}
if ! { cmake --preset gpu "${prefix[@]}" >"$ARFUSE_LOG_DIR/cmake.log" 2>&1 &&
       cmake --build build-gpu -j"$(nproc)" >"$ARFUSE_LOG_DIR/build.log" 2>&1; }; then
  tail -40 "$ARFUSE_LOG_DIR/cmake.log" "$ARFUSE_LOG_DIR/build.log"
  return 1 2>/dev/null || exit 1
fi
build-gpu/tools/arfuse-warmup --quiet --json "$ARFUSE_LOG_DIR/warmup.json" | tail -4
# NCCL for the [gpu][nccl] tests and the bench's NCCL peer: PyTorch's wheel carries one.
if [ -z "${ARFUSE_NCCL_LIBRARY:-}" ]; then
  for d in $("${ARFUSE_PYTHON:-python3}" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) /usr/lib /usr/local; do
    found=$(find "$d" -name 'libnccl.so.2' 2>/dev/null | head -1)
    if [ -n "$found" ]; then export ARFUSE_NCCL_LIBRARY=$found; break; fi
  done
fi
echo "NCCL: ${ARFUSE_NCCL_LIBRARY:-not found}"
