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
