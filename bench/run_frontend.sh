#!/usr/bin/env bash
# Front-end benchmark: hypipe from spec text to printed MLIR for a 10,000-layer,
# 1,024-segment pattern, next to a Python peer doing Megatron's parse + placement.
# Usage: bench/run_frontend.sh [reps]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/build/bin/bench-frontend" "$reps" "$tmp/pattern.txt" | tee "$tmp/hypipe.txt"
peer=$(/usr/bin/python3 "$root/bench/peer_megatron_semantics.py" "$tmp/pattern.txt" 128 "$reps")
load=$(awk '/^load spec/ {print $NF}' "$tmp/hypipe.txt")
printf '%-40s %10s\n' "peer: Python parse + place (Megatron way)" "$peer"
awk -v p="$peer" -v l="$load" 'BEGIN { printf "%-40s %10.1fx\n", "peer time / hypipe load+place time", p / l }'
