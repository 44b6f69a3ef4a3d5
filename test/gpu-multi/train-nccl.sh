#!/bin/bash
# pp 2 x vpp 2 x dp 2 of the bundled example on four GPUs over NCCL, with the
# distributed optimizer, against the cpu target's run of the same layout:
# first step within 1e-5, 20 steps within 2e-3 (the GPU kit's tolerances).
# usage: train-nccl.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun="mpirun --allow-run-as-root --oversubscribe -np 4"
data="$src/examples/data/licenses.txt"
for target in cpu cuda; do
  "$build/bin/hypipe" compile "$src/examples/hybrid-tiny.yaml" --dp 2 \
    --distributed-optimizer --target $target -o "$tmp/$target" > /dev/null
done
$mpirun "$build/bin/hypipe-run" "$tmp/cpu" -q --steps 20 --data "$data" \
  --json-log "$tmp/cpu.jsonl" > /dev/null
$mpirun "$build/bin/hypipe-run" "$tmp/cuda" -q --steps 20 --data "$data" \
  --comm nccl --json-log "$tmp/nccl.jsonl" > /dev/null
python3 "$src/scripts/gpu-kit/losses.py" "$tmp/cpu.jsonl" "$tmp/nccl.jsonl" \
  --first-rtol 1e-5 --rtol 2e-3
