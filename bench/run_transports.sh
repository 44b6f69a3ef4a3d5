#!/usr/bin/env bash
# The transports on the CPU (docs/runtime.md, "Transports"), after
# scripts/build.sh: each layout of bench/specs/train-bench.yaml trained with
# --comm mpi and --comm mpi-staged (every tensor through host staging
# buffers: what ranks sharing a GPU do), tokens/s of the steps after the first
# (median of 3 runs each) and their ratio; the losses must be the same bits.
# Usage: bench/run_transports.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-6}
bin=${BIN:-$root/build/bin}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
spec="$root/bench/specs/train-bench.yaml"

tps() { # log -> tokens/s of the steps after the first
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
print("%.0f" % (sum(r["tokens"] for r in rows) / sum(r["tokens"] / r["tokens_per_s"] for r in rows)))
PY
}

median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }

echo "| layout | ranks | mpi tokens/s | mpi-staged tokens/s | staged / mpi | losses |"
echo "|---|---:|---:|---:|---:|---|"
for layout in "--pp 2 --schedule 1f1b --microbatches 4" \
  "--pp 2 --vpp 2 --schedule interleaved-1f1b --microbatches 4" \
  "--dp 2 --microbatches 2 --distributed-optimizer" \
  "--pp 2 --dp 2 --microbatches 2 --distributed-optimizer"; do
  name=$(echo "$layout" | tr -d ' -')
  # shellcheck disable=SC2086
  "$bin/hypipe" compile "$spec" $layout -o "$tmp/$name" > /dev/null
  np=$(/usr/bin/python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['parallel']; print(p['pp']*p['dp'])" "$tmp/$name/manifest.json")
  declare -A rate=()
  for comm in mpi mpi-staged; do
    runs=()
    for i in 1 2 3; do
      "${mpirun[@]}" -np "$np" "$bin/hypipe-run" "$tmp/$name" --steps "$steps" -q \
        --comm "$comm" --json-log "$tmp/$name-$comm.jsonl" > /dev/null
      runs+=("$(tps "$tmp/$name-$comm.jsonl")")
    done
    rate[$comm]=$(median "${runs[@]}")
  done
  same=$(/usr/bin/python3 "$root/test/e2e/compare_logs.py" "$tmp/$name-mpi.jsonl" \
    "$tmp/$name-mpi-staged.jsonl" same | cut -d: -f1)
  ratio=$(/usr/bin/python3 -c "print('%.3f' % (${rate[mpi-staged]} / ${rate[mpi]}))")
  echo "| $layout | $np | ${rate[mpi]} | ${rate[mpi-staged]} | $ratio | $same |"
done
