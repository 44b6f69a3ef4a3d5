#!/usr/bin/env bash
# Tensor parallelism on this machine (after scripts/build.sh): `hypipe train`
# of bench/specs/tp-bench.yaml (M*M-M*M-, hidden 256, seq 256, micro-batch 4,
# 4 microbatches a step: 4,096 tokens) at tp 1 (one rank on every core), tp 2
# (two ranks of a core each, every layer split and joined by an all-reduce
# per pass), tp 2 with sequence parallelism, and pp 2 (the same two ranks as
# a pipeline) for scale. Per layout: tokens/s (the mean over the steps after
# the first), its ratio to tp 1, the peak tensor MiB of rank 0 as its device
# measured it, the last loss, and the step time `hypipe explain --device cpu`
# predicts (the cost model's FLOPs and the tp collectives on the cpu device's
# link) beside the measured one. No peer: PyTorch's tensor parallelism needs
# torch.distributed's process groups, which this benchmark does not set up.
# Usage: bench/run_tensor_parallel.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$root/build/bin/bench-sgemm" --core)}
steps=${1:-8}
spec="$root/bench/specs/tp-bench.yaml"
work=$(mktemp -d)
layouts=(
  "tp=1|1|--tp 1"
  "tp=2|2|--tp 2"
  "tp=2 sp|2|--tp 2 --sequence-parallel"
  "pp=2|2|--pp 2 --schedule 1f1b"
)
printf '%-10s %6s %10s %8s %11s %10s %12s %12s\n' layout ranks "tok/s" "vs tp=1" "tensor MiB" "last loss" "step meas." "step pred."
base=""
for entry in "${layouts[@]}"; do
  name=${entry%%|*}
  rest=${entry#*|}
  ranks=${rest%%|*}
  read -r -a flags <<< "${rest#*|}"
  dir="$work/run-${name//[^a-z0-9]/}"
  "$root/build/bin/hypipe" train "$spec" "${flags[@]}" --steps "$steps" --no-save \
    --run-dir "$dir" > "$dir.out" 2>&1 || { cat "$dir.out"; exit 1; }
  predicted=$("$root/build/bin/hypipe" explain "$spec" "${flags[@]}" --device cpu --json |
    /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['simulation']['predicted_step_s'])")
  /usr/bin/python3 - "$dir" "$name" "${base:-0}" "$predicted" "$ranks" <<'PY' > "$dir.row"
import glob, json, os, sys
d, name, base, predicted = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
s = json.load(open(os.path.join(d, "summary.json")))
log = [json.loads(l) for l in open(glob.glob(os.path.join(d, "*.jsonl"))[0])]
later = log[1:] or log
rate = sum(r["tokens_per_s"] for r in later) / len(later)
step = sum(r["tokens"] / r["tokens_per_s"] for r in later) / len(later)
mem = s["memory_mib"][0]["tensors"]
ranks = int(sys.argv[5])
ratio = rate / base if base > 0 else 1.0
print("%-10s %6d %10.0f %7.2fx %11.1f %10.4f %11.4fs %11.4fs %.3f"
      % (name, ranks, rate, ratio, mem, log[-1]["loss"], step, predicted, rate))
PY
  row=$(cat "$dir.row")
  printf '%s\n' "${row% *}"
  [[ -n $base ]] || base=${row##* }
done
rm -rf "$work"
