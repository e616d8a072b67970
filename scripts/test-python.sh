#!/usr/bin/env bash
# The Python package: `pip install .` into a fresh virtual environment (.venv-python/, ignored),
# then its CPU tests (pytest -m "not gpu"). Run by CI after scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup-deps.sh >/dev/null
rm -rf .venv-python
python3 -m venv .venv-python
.venv-python/bin/python -m pip install --quiet --upgrade pip
.venv-python/bin/python -m pip install --quiet ".[test]"
# Outside the source tree, so that `import arfuse` finds the installed package, not python/.
cd /tmp && "$OLDPWD/.venv-python/bin/python" -m pytest -q -m "not gpu" "$OLDPWD/tests/python"
