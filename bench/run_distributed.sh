#!/usr/bin/env bash
# Distributed training throughput (after scripts/build.sh): `hypipe train` on
# bench/specs/train-bench.yaml (M*M-M*ME, hidden 256, seq 256, micro-batch 4)
# with one global batch of 8 microbatches (8,192 tokens) per step, laid out as
# pp 1, pp 2 (1f1b), pp 2 x vpp 2 (interleaved), pp 2 with every other
# schedule (gpipe, zb-h1, zbv, dualpipev), dp 2 and dp 2 with the distributed
# optimizer on
# this machine's cores, next to eager
# PyTorch training the same model on all cores in the same run. For pipeline
# layouts: the measured bubble, the mean over the steps after the first (from the real per-action
# trace) next to the simulator's prediction for the measured stage costs.
# Every layout: the peak tensor memory of pipeline rank 0's first replica as
# its device measured it (summary.json memory_mib).
# Usage: bench/run_distributed.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The OpenBLAS settings hypipe-run makes for itself, for the peer too
# (bench/run_train.sh).
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$root/build/bin/bench-sgemm" --core)}
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
steps=${1:-6}
spec="$root/bench/specs/train-bench.yaml"
work=$(mktemp -d)
cores=$(nproc)
layouts=(
  "pp=1|--pp 1 --microbatches 8"
  "pp=2|--pp 2 --microbatches 8 --schedule 1f1b"
  "pp=2 x vpp=2|--pp 2 --vpp 2 --microbatches 8 --schedule interleaved-1f1b"
  "pp=2 gpipe|--pp 2 --microbatches 8 --schedule gpipe"
  "pp=2 zb-h1|--pp 2 --microbatches 8 --schedule zb-h1"
  "pp=2 zbv|--pp 2 --vpp 2 --microbatches 8 --schedule zbv"
  "pp=2 dualpipev|--pp 2 --vpp 2 --microbatches 8 --schedule dualpipev"
  "dp=2|--dp 2 --microbatches 4"
  "dp=2 dist-opt|--dp 2 --microbatches 4 --distributed-optimizer"
)
printf '%-16s %8s %10s %12s %9s %12s %14s %14s %12s\n' layout ranks threads "tok/s" "vs pp=1" "vs PyTorch" "bubble meas." "bubble sim." "tensor MiB"
# The peer runs with every thread count up to the cores and keeps its best:
# on small ops PyTorch's intra-op threads can cost more than they give.
"$root/build/bin/hypipe" compile "$spec" --pp 1 -o "$work/peer" > /dev/null
peer=0
peerThreads=1
for ((t = 1; t <= cores; t++)); do
  read -r rate _ < <(/usr/bin/python3 "$root/bench/peer_train.py" "$work/peer" "$t" "$steps")
  if awk -v a="$rate" -v b="$peer" 'BEGIN { exit !(a > b) }'; then
    peer=$rate
    peerThreads=$t
  fi
done
base=""
for entry in "${layouts[@]}"; do
  name=${entry%%|*}
  read -r -a flags <<< "${entry#*|}"
  dir="$work/run-${name//[^a-z0-9]/}"
  "$root/build/bin/hypipe" train "$spec" "${flags[@]}" --steps "$steps" --no-save \
    --run-dir "$dir" > "$dir.out" 2>&1 || { cat "$dir.out"; exit 1; }
  /usr/bin/python3 - "$dir/summary.json" "$name" "$cores" "$peer" "${base:-0}" <<'PY' > "$dir.row"
import json, sys
s = json.load(open(sys.argv[1]))
name, cores, peer, base = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
lay = s["layout"]
ranks = lay["pp"] * lay["dp"]
tps = s["tokens_per_s"]
b = s.get("bubble")
meas = "%.1f%%" % (100 * sum(b["measured"]) / len(b["measured"])) if lay["pp"] > 1 else "-"
sim = "%.1f%%" % (100 * sum(b["predicted"]) / len(b["predicted"])) if lay["pp"] > 1 else "-"
mem = s.get("memory_mib") or [{}]
tensors = "%.2f" % mem[0]["tensors"] if "tensors" in mem[0] else "-"
print("%-16s %8d %10d %12.0f %8.2fx %11.2fx %14s %14s %12s" % (
    name, ranks, max(1, cores // ranks), tps, tps / base if base else 1.0, tps / peer, meas, sim,
    tensors))
PY
  cat "$dir.row"
  [ -n "$base" ] || base=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens_per_s"])' "$dir/summary.json")
done
echo "(PyTorch eager, same model, one process at its best thread count ($peerThreads of 1..$cores): $peer tok/s; tok/s = mean over steps 2..$steps;"
echo " bubble = 1 - compute / step time, mean over pipeline ranks; simulated = hypipe's schedule simulator fed the measured per-stage F/B costs)"
