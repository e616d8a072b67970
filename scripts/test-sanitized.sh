#!/usr/bin/env bash
# The [cpu] tests under AddressSanitizer and UBSan (build-asan/): memory errors, leaks and
# undefined behaviour fail the run. The tools the tests start (arfuse-warmup, arfuse-cache) are
# sanitized too.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ASAN_BUILD_DIR:-build-asan}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DARFUSE_SANITIZE=ON >/dev/null
cmake --build "$build" -j"$(nproc)" --target arfuse-tests arfuse-warmup arfuse-cache
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
log="$build/sanitized-cpu.log"
status=0
"$build/tests/arfuse-tests" "[cpu]" --order rand >"$log" 2>&1 || status=$?
grep -av '^arfuse: warning' "$log" | tail -4
if grep -aq 'All tests passed' "$log"; then
  passed=$(grep -aoE 'in [0-9]+ test cases' "$log" | grep -oE '[0-9]+')
  failed=0
else
  passed=$(grep -aoE 'test cases: +[0-9]+ \| +[0-9]+ passed' "$log" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
  failed=$(grep -aoE 'test cases: .*\| +[0-9]+ failed' "$log" | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || echo 1)
fi
echo "sanitized [cpu] test cases (ASan + UBSan): ${passed:-0} passed, ${failed:-1} failed"
exit "$status"
