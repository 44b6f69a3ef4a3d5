#!/usr/bin/env bash
# The data-parallel all-reduce started bucket by bucket inside the last
# backward (runtime/exec/GradientBuckets.h) against one bucket a stage
# (nothing final before the pass ends, so nothing overlapped), and the same
# for the distributed optimizer's reduce-scatter (its shards follow the
# buckets: runtime/exec/ShardLayout.h), after scripts/build.sh:
# bench/specs/train-bench.yaml at dp 2, one thread a rank, alternating runs;
# tokens/s the median of the steps after the first, and the buckets each run
# started inside the pass (dp_buckets_in_backward).
# Usage: bench/run_buckets.sh [steps] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-20}
rounds=${2:-3}
bin=${BIN:-$root/build/bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin/hypipe" compile "$root/bench/specs/train-bench.yaml" --dp 2 --microbatches 2 \
  --steps "$steps" -o "$tmp/all-reduce" > /dev/null
"$bin/hypipe" compile "$root/bench/specs/train-bench.yaml" --dp 2 --microbatches 2 \
  --distributed-optimizer --steps "$steps" -o "$tmp/dist-opt" > /dev/null
echo "hypipe $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, train-bench dp 2, $steps steps, 1 thread a rank"
printf '%-6s %-11s %-22s %12s %22s\n' round reduction buckets "tokens/s" "buckets in backward"
for r in $(seq "$rounds"); do
  for art in all-reduce dist-opt; do
    for mib in 64 1; do
      mpirun --allow-run-as-root --oversubscribe -np 2 "$bin/hypipe-run" "$tmp/$art" -q \
        --threads 1 --grad-bucket-mib "$mib" --json-log "$tmp/$mib.jsonl" > /dev/null
      /usr/bin/python3 - "$tmp/$mib.jsonl" "$r" "$mib" "$art" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
label = "%s MiB (%s)" % (sys.argv[3], "one a stage" if sys.argv[3] == "64" else "overlapped")
print("%-6s %-11s %-22s %12.0f %22d" % (sys.argv[2], sys.argv[4], label,
      statistics.median(r["tokens_per_s"] for r in rows), rows[-1]["dp_buckets_in_backward"]))
PY
    done
  done
done
