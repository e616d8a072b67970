#!/usr/bin/env bash
# On a machine with a GPU: builds and warms (scripts/gpu-run.sh), then runs every GPU suite at this
# tree (as CONTRIBUTING.md lists them), logs under $ARFUSE_LOG_DIR and one line per suite at the end. The
# two in-process [gpu] halves and [cpu] run at once; [multiprocess], [gpu][nccl], the quick
# start and the Python GPU tests (with $ARFUSE_PYTHON, which has torch) after them, alone. A suite
# that would start after --budget seconds is reported NOT RUN. Exit status 0 only when every
# suite ran and passed.
# Usage: scripts/gpu-suites.sh [--budget SECONDS] [--no-python]
set -uo pipefail
budget=540 python=1
while [ $# -gt 0 ]; do
  case "$1" in
    --budget) budget=${2:?--budget takes a number of seconds}; shift 2 ;;
    --no-python) python=0; shift ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-suites.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$budget" in ''|*[!0-9]*) echo "gpu-suites.sh: --budget takes whole seconds, not '$budget'" >&2; exit 2 ;; esac
tests=build-gpu/tests/arfuse-tests
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-run.sh
source scripts/gpu-run.sh || { echo "gpu-suites.sh: the build or the warm-up failed (above)" >&2; exit 2; }
logs=${ARFUSE_LOG_DIR:-$PWD/gpu-logs}
mkdir -p "$logs"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }

suite() {  # name, then the test binary's arguments
  local name=$1; shift
  "$tests" "$@" > "$logs/$name.txt" 2>&1
  echo $? > "$logs/$name.rc"
}
suite gpu-fused "[gpu][fused]~[multiprocess]~[nccl]" &
suite gpu-other "[gpu]~[fused]~[multiprocess]~[nccl]" &
suite cpu "[cpu]" &
wait
for pair in "multiprocess:[multiprocess]" "gpu-nccl:[gpu][nccl]"; do
  name=${pair%%:*}
  if [ "$(elapsed)" -lt "$budget" ]; then suite "$name" "${pair#*:}"; else echo "NOT RUN (time)" > "$logs/$name.txt"; fi
done
if [ "$(elapsed)" -lt "$budget" ]; then
  build-gpu/examples/arfuse-example-quickstart > "$logs/quickstart.txt" 2>&1
  echo $? > "$logs/quickstart.rc"
else
  echo "NOT RUN (time)" > "$logs/quickstart.txt"
fi
if [ "$python" = 1 ]; then
  if [ "$(elapsed)" -lt "$budget" ]; then
    py=${ARFUSE_PYTHON:-python3}
    if CMAKE_PREFIX_PATH=${ARFUSE_DEPS_PREFIX:-} timeout 150 "$py" -m pip install --no-build-isolation --no-deps . > "$logs/pip.log" 2>&1; then
      left=$(( budget + 50 - $(elapsed) )); [ "$left" -ge 60 ] || left=60
      ( cd /tmp && timeout "$left" "$py" -m pytest -q -m gpu "$OLDPWD/tests/python" ) > "$logs/pytest-gpu.txt" 2>&1
      echo $? > "$logs/pytest-gpu.rc"
    else
      echo "pip install failed: $logs/pip.log" > "$logs/pytest-gpu.txt"; echo 1 > "$logs/pytest-gpu.rc"
    fi
  else
    echo "NOT RUN (time)" > "$logs/pytest-gpu.txt"
  fi
fi

status=0
echo "| suite | result |"
echo "|---|---|"
for name in gpu-fused gpu-other cpu multiprocess gpu-nccl quickstart pytest-gpu; do
  [ -f "$logs/$name.txt" ] || continue
  if [ -f "$logs/$name.rc" ]; then
    rc=$(cat "$logs/$name.rc")
    line=$(grep -aE 'All tests passed|test cases:|assertions:|passed|failed|^ok$' "$logs/$name.txt" | tail -1)
    [ "$rc" = 0 ] || status=1
    echo "| $name | rc $rc: ${line:-no summary line} |"
  else
    status=1
    echo "| $name | $(head -1 "$logs/$name.txt") |"
  fi
done
echo "total: $(elapsed) s"
exit $status
