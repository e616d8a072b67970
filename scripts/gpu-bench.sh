#!/usr/bin/env bash
# On the GPU machine, after `source scripts/gpu-run.sh`: the README's performance tables.
# Writes markdown, JSON and SVG under $OUT. Usage: scripts/gpu-bench.sh [quick]
set -uo pipefail
B=build-device/tools/arfuse-bench
PY=$(command -v /opt/torch/.venv/bin/python3 || command -v python3)
runs=7 replays=20
[ "${1:-}" = quick ] && runs=5 replays=10
timeout 150 "$PY" tools/bench/torch_bench.py --runs $runs --replays $replays --json "$OUT/torch.json" > "$OUT/torch.md" 2>&1 || echo "torch_bench failed: $(tail -3 "$OUT/torch.md")"
peers=(); [ -s "$OUT/torch.json" ] && peers=(--peers "$OUT/torch.json")
timeout 120 $B epilogue --runs $runs --replays $replays "${peers[@]}" --json "$OUT/epilogue.json" --svg "$OUT/epilogue.svg" > "$OUT/epilogue.md" 2>&1; echo "epilogue rc=$?"
timeout 150 $B fused --world 4 --runs $runs --replays $replays --json "$OUT/fused.json" --svg "$OUT/fused.svg" > "$OUT/fused.md" 2>&1; echo "fused rc=$?"
timeout 60 $B allreduce --world 4 --runs $runs --replays $replays --json "$OUT/allreduce.json" > "$OUT/allreduce.md" 2>&1; echo "allreduce rc=$?"
timeout 120 $B fused --tune "$OUT/tuning.json" --world 2,4,8 --tokens 16,128,512,2048 --runs 3 --replays 5 > "$OUT/tune.md" 2>&1; echo "tune rc=$?"
