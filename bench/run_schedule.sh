#!/usr/bin/env bash
# Schedule benchmark (after scripts/build.sh): interleaved-1f1b at pp=64, vpp=8
# and 1,024 microbatches — generate, insert communication, verify, simulate —
# next to a Python peer doing the generation and the dependency simulation
# (compute actions only, no communication, no verification).
# Usage: bench/run_schedule.sh [microbatches]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
m=${1:-1024}
"$root/build/bin/bench-schedule" "$m" | tee /tmp/hypipe-bench-schedule.txt
read -r peer_ms peer_bubble < <(/usr/bin/python3 "$root/bench/peer_schedule.py" 64 8 "$m")
total=$(awk '/^total/ {print $NF}' /tmp/hypipe-bench-schedule.txt)
printf '%-44s %10s\n' "peer: Python generate + simulate (compute only)" "$peer_ms"
awk -v p="$peer_ms" -v t="$total" -v b="$peer_bubble" \
  'BEGIN { printf "%-44s %10.1fx   (peer bubble %s)\n", "peer time / hypipe total", p / t, b }'
