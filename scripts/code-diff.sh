#!/usr/bin/env bash
# Which kernels a template change touches, without a GPU: warms the default set (or --config FILE)
# from the templates of git revision REV and from those of the working tree (or of revision NEW)
# into two fresh caches, then prints `arfuse-cache code-diff` of them: every spec whose code,
# constant or shared-memory sections differ. Needs a built $BUILD_DIR (default build/; ./scripts/test.sh).
# Usage: scripts/code-diff.sh [--target T]... [--config FILE] [--jobs N] REV [NEW]
# Exit status: 0 same code everywhere, 1 some spec differs, 2 usage or warm-up error.
set -uo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '6,7p' "$0" | sed 's/^# //'; }
warm_args=() revs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target|--config|--jobs)
      [ $# -ge 2 ] || { echo "code-diff.sh: $1 takes a value" >&2; exit 2; }
      warm_args+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "code-diff.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) revs+=("$1"); shift ;;
  esac
done
[ ${#revs[@]} -ge 1 ] && [ ${#revs[@]} -le 2 ] || { echo "code-diff.sh: give one or two revisions" >&2; usage >&2; exit 2; }
case " ${warm_args[*]-} " in *" --target "*|*" --config "*) ;; *) warm_args+=(--target sm_90) ;; esac
build=${BUILD_DIR:-build}
for tool in "$build/tools/arfuse-warmup" "$build/tools/arfuse-cache"; do
  [ -x "$tool" ] || { echo "code-diff.sh: no $tool: build first (./scripts/test.sh)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/arfuse-code-diff.XXXXXX)
trap 'rm -rf "$work"' EXIT
templates_of() {  # REV FOLDER: REV's arfuse/templates in FOLDER
  git rev-parse --verify --quiet "$1^{commit}" >/dev/null || { echo "code-diff.sh: '$1' is not a revision" >&2; return 2; }
  mkdir -p "$2" && git -c tar.umask=0022 archive "$1" arfuse/templates | tar -x -C "$2" --strip-components=2
}
templates_of "${revs[0]}" "$work/old" || exit 2
# A revision from before the graph kernels cannot build them: compare the kernels both have.
if ! grep -q fused_ar_graph_kernel "$work/old/fused_ar.cuh"; then
  echo "${revs[0]} has no graph kernels: comparing the others (--no-graph-kernels)"
  warm_args+=(--no-graph-kernels)
fi
new_templates=$PWD/arfuse/templates new_name="the working tree"
if [ ${#revs[@]} = 2 ]; then
  templates_of "${revs[1]}" "$work/new" || exit 2
  new_templates=$work/new new_name=${revs[1]}
fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for side in old new; do
  dir=$work/old; [ $side = new ] && dir=$new_templates
  echo "warming ${warm_args[*]} from $([ $side = old ] && echo "${revs[0]}" || echo "$new_name")'s templates"
  # One progress line every 100 specs (the default set is 1076 a target: minutes here).
  ARFUSE_TEMPLATE_DIR=$dir "$build/tools/arfuse-warmup" "${warm_args[@]}" --cache-dir "$work/cache-$side" 2>&1 |
    tee "$work/$side.log" | awk -F'[][/]' '/^\[[0-9]+\/[0-9]+\]/ && ($2 % 100 == 0 || $2 == $3) { print "  " $2 " of " $3; fflush() }'
  [ "${PIPESTATUS[0]}" = 0 ] ||
    { cat "$work/$side.log" >&2; echo "code-diff.sh: the warm-up from the $side templates failed" >&2; exit 2; }
done
"$build/tools/arfuse-cache" --cache-dir "$work/cache-old" code-diff "$work/cache-new" | sed "s#$work/cache-old#${revs[0]}#g; s#$work/cache-new#$new_name#g"
exit "${PIPESTATUS[0]}"
