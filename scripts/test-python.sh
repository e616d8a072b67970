#!/usr/bin/env bash
# The Python package: `pip install .` into a fresh virtual environment (.venv-python/, ignored),
# then its CPU tests (pytest -m "not gpu"), which skip the torch tests. With --torch, PyPI's
# torch 2.11 is installed next and the tests run again:
# the ops compile against it on import and their Meta kernels, opcheck and torch.compile run on
# the CPU. Run by CI (with --torch) after scripts/test.sh.
# Usage: scripts/test-python.sh [--torch]
set -euo pipefail
with_torch=0
case "${1:-}" in
  --torch) with_torch=1 ;;
  "") ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "test-python.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
repo=$PWD
./scripts/setup-deps.sh >/dev/null
rm -rf .venv-python
python3 -m venv .venv-python
.venv-python/bin/python -m pip install --quiet --upgrade pip
.venv-python/bin/python -m pip install --quiet ".[test]"
# Outside the source tree, so that `import arfuse` finds the installed package, not python/.
cd /tmp
"$repo/.venv-python/bin/python" -m pytest -q -m "not gpu" "$repo/tests/python"
if [ "$with_torch" = 1 ]; then
  "$repo/.venv-python/bin/python" -m pip install --quiet "torch==2.11.*"
  ARFUSE_CACHE_DIR="$repo/.venv-python/arfuse-cache" \
    "$repo/.venv-python/bin/python" -m pytest -q -m "not gpu" "$repo/tests/python"
fi
