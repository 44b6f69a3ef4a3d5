#!/usr/bin/env bash
# The 8B example at scale, on paper (issues 35 and 38), after
# scripts/build.sh: `hypipe explain --device h100` of pp 8 x dp 128 (1,024
# GPUs: memory, bubble, what communication adds, the step), and `hypipe
# plan --gpus N` for 8, 64, 512 and 1,024 H100s, with the search times.
# Prints markdown (bench/results/scale.md is its output).
# Usage: bench/run_scale.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/bin}
spec="$root/examples/hybrid-8b.yaml"
run() {
  echo
  echo '```console'
  echo "\$ $*" | sed "s|$root/||g; s|$bin/||"
  { "$@" 2>&1 || true; } | sed "s|$root/||g"
  echo '```'
}
echo "hypipe $(git -C "$root" rev-parse --short HEAD), $(date -u +%F)"
echo
echo "## pp 8 x dp 128 on 1,024 H100s (8 a node): the layout issue 38 asks about"
run "$bin/hypipe" explain "$spec" --device h100 --pp 8 --dp 128 --microbatches 16
run "$bin/hypipe" explain "$spec" --device h100 --pp 8 --dp 128 --microbatches 16 \
  --distributed-optimizer
echo
echo "## hypipe plan --gpus N, global batch 8 a GPU (4,096 at most)"
for gpus in 8 64 512 1024; do
  batch=$((gpus * 8 > 4096 ? 4096 : gpus * 8))
  run "$bin/hypipe" plan "$spec" --gpus "$gpus" --global-batch "$batch" --top 3 \
    --memory-of megatron
done
echo
echo "## hypipe-run's own memory (float buffers) on 80 GiB"
run "$bin/hypipe" plan "$spec" --gpus 64 --global-batch 512 --top 3
run "$bin/hypipe" plan "$spec" --gpus 64 --device h200 --global-batch 512 --top 3
