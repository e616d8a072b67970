#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz for a fixed number of inputs each, under AddressSanitizer
# and UBSan, in build-fuzz/ (clang). Any crash, sanitizer report, leak, timeout or exception other
# than arfuse::Error fails the run; libFuzzer then leaves the input as build-fuzz/crash-*.
#   scripts/fuzz.sh [RUNS]     (default 20000 inputs per target)
# The seeds in tests/fuzz/seeds are copied into a scratch corpus, so the repository never changes.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
runs=${1:-20000}
if ! [[ "$runs" =~ ^[0-9]+$ ]]; then echo "fuzz.sh: RUNS must be a whole number, not '$runs'" >&2; exit 2; fi
if ! command -v clang++ >/dev/null 2>&1; then
  echo "NOT RUN: the fuzz targets need clang++ with libFuzzer (scripts/setup-deps.sh installs it)"
  [ -n "${CI:-}" ] && exit 1
  exit 0
fi
build=${FUZZ_BUILD_DIR:-build-fuzz}
cmake --preset fuzz -B "$build" >/dev/null  # clang, sanitized, the fuzz targets only: CMakePresets.json
cmake --build "$build" -j"$(nproc)" --target arfuse-fuzz-entry arfuse-fuzz-footprint
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for reader in entry footprint; do
  corpus="$build/corpus-$reader"
  rm -rf "$corpus" && mkdir -p "$corpus" && cp tests/fuzz/seeds/"$reader"/* "$corpus"/
  log="$build/fuzz-$reader.log"
  status=0
  (cd "$build" && "./arfuse-fuzz-$reader" -runs="$runs" -seed=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
     "corpus-$reader") >"$log" 2>&1 || status=$?
  tail -2 "$log"
  if [ "$status" != 0 ]; then
    echo "fuzz target $reader FAILED (exit $status): see $log"
    grep -aE 'ERROR|runtime error|terminate|Test unit written' "$log" | head -5
    exit 1
  fi
  echo "fuzz target $reader: $runs inputs, no finding"
done
