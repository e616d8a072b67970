#!/usr/bin/env bash
# On a machine with a GPU: builds and warms (scripts/gpu-run.sh), then takes the measurements behind
# docs/performance.md, as JSON, charts and the page's tables (scripts/perf-tables.py), under
# $ARFUSE_LOG_DIR (default gpu-logs/). The PyTorch and kernel peers run with $ARFUSE_PYTHON
# (default python3; needs torch, and arfuse installed in it; FlashInfer and Liger where present). Usage: scripts/gpu-bench.sh [--runs N]
set -uo pipefail
runs=7
case "${1:-}" in
  --runs) runs=${2:?--runs takes a number}; shift 2 ;;
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "gpu-bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
B=build-gpu/tools/arfuse-bench
cd "$(dirname "$0")/.."
# shellcheck source=scripts/gpu-run.sh
source scripts/gpu-run.sh || { echo "gpu-bench.sh: the build or the warm-up failed (above)" >&2; exit 2; }
logs=${ARFUSE_LOG_DIR:-$PWD/gpu-logs}
mkdir -p "$logs"
shapes=1x6144,8x6144,32x6144,64x6144,128x6144,256x6144,512x6144,1024x6144,4096x6144,1x8192,8x8192,32x8192,64x8192,128x8192,256x8192,512x8192,1024x8192,4096x8192
large=2517x6144,4097x6144,2048x8192
"${ARFUSE_PYTHON:-python3}" tools/bench/torch_bench.py --kernel-peers flashinfer,liger --shapes "$shapes,$large" --quant none,fp8,fp8_group,mxfp4,fp8_static,nvfp4 \
  --runs "$runs" --json "$logs/torch.json" > "$logs/torch.md" 2>&1 || echo "torch_bench failed: $(tail -3 "$logs/torch.md")"
peers=(); [ -s "$logs/torch.json" ] && peers=(--peers "$logs/torch.json")
run() {  # name, table kind, then the bench's arguments
  local name=$1 kind=$2; shift 2
  $B "$@" --runs "$runs" --json "$logs/$name.json" > "$logs/$name.txt" 2>&1; echo "$name: exit status $?"
  python3 scripts/perf-tables.py "$kind" "$logs/$name.json" --command "arfuse-bench $*" >> "$logs/tables.md" && echo >> "$logs/tables.md"
}
: > "$logs/tables.md"
run epilogue epilogue epilogue --copy-rows --shapes "$shapes" --quant none,fp8 "${peers[@]}" --svg "$logs/epilogue.svg"
run epilogue-block epilogue epilogue --copy-rows --shapes "$large" --quant fp8_group,mxfp4,fp8_static,nvfp4 "${peers[@]}"
"${ARFUSE_PYTHON:-python3}" tools/bench/torch_bench.py --kernel-peers flashinfer,liger --fixed-inputs --shapes "$shapes" --quant none,fp8 \
  --runs "$runs" --json "$logs/torch-fixed.json" > "$logs/torch-fixed.md" 2>&1 || echo "torch_bench failed: $(tail -3 "$logs/torch-fixed.md")"
peers=(); [ -s "$logs/torch-fixed.json" ] && peers=(--peers "$logs/torch-fixed.json")
run epilogue-fixed epilogue epilogue --fixed-inputs --copy-rows --shapes "$shapes" --quant none,fp8 "${peers[@]}"
run fused fused fused --world 4 --shapes 12x6144,128x8192,512x6144,2517x6144,2048x8192 --quant none,fp8,fp8_group,mxfp4,fp8_static,nvfp4 --svg "$logs/fused.svg"
echo "tables: $logs/tables.md"
