#!/usr/bin/env bash
# Checks every C++ and device-code file git tracks or would add (untracked and not ignored, so a
# new file is checked before its first commit) against .clang-format (Debian 12's clang-format
# 14) and the 120-column limit it sets; prints the files that differ and exits 1.
# Fix with: clang-format -i $(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cuh')
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/setup-deps.sh installs it)" >&2; exit 1; }
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cuh')
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f"
    bad=1
  fi
  if awk 'length($0) > 120 { exit 1 }' "$f"; then :; else
    echo "line over 120 columns: $f"
    bad=1
  fi
done
if [ "$bad" -ne 0 ]; then exit 1; fi
echo "format: ${#files[@]} files match .clang-format"
