#!/usr/bin/env bash
# Partitioner benchmark (after scripts/build.sh): a 10,000-layer pattern into
# 1,024 segments, and what `hypipe explain` computes for an 8B hybrid; plus the
# wall time of the `hypipe explain` process itself.
# Usage: bench/run_partition.sh [reps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-5}
"$root/build/bin/bench-partition" "$reps"
start=$(date +%s%N)
for _ in $(seq "$reps"); do "$root/build/bin/hypipe" explain "$root/examples/hybrid-8b.yaml" > /dev/null; done
end=$(date +%s%N)
awk -v t=$(( (end - start) / reps )) 'BEGIN { printf "%-62s %10.2f\n", "hypipe explain examples/hybrid-8b.yaml (whole process, mean)", t / 1e6 }'
