#!/usr/bin/env bash
# On the GPU machine (see DEVELOPERS.md): unpack the carried .devdeps, build into
# build-device/, warm the cache. Sourced by the device commands.
set -o pipefail
mkdir -p /tmp/dd
for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/dd; done
export LD_LIBRARY_PATH=/tmp/dd/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export ARFUSE_CACHE_DIR=/tmp/arfuse-cache
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if ! { cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/tmp/dd/usr -DARFUSE_BUILD_TESTS=ON >"$OUT/cmake.log" 2>&1 &&
       cmake --build build-device -j16 >"$OUT/build.log" 2>&1; }; then
  tail -40 "$OUT/cmake.log" "$OUT/build.log"
  exit 1
fi
build-device/tools/arfuse-warmup --quiet --jobs 16 --json "$OUT/warmup.json" | tail -4
# NCCL for the [gpu][nccl] tests and the bench's NCCL peer: PyTorch's wheel carries one.
if [ -z "${ARFUSE_NCCL_LIBRARY:-}" ]; then
  for d in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) /usr/lib /usr/local; do
    found=$(find "$d" -name 'libnccl.so.2' 2>/dev/null | head -1)
    if [ -n "$found" ]; then export ARFUSE_NCCL_LIBRARY=$found; break; fi
  done
fi
echo "NCCL: ${ARFUSE_NCCL_LIBRARY:-not found}"
