#!/usr/bin/env bash
# The linear cross-entropy (model.cross_entropy_fusion_impl: linear,
# docs/precision.md), after scripts/build.sh: bench/specs/train-bench.yaml in
# bf16 over 2 pipeline ranks with 8 microbatches a step, its vocabulary
# padded to 8192 and to 32768 (--make-vocab-size-divisible-by: the head's
# 1024 x vocab logits a microbatch on rank 1), under GPipe (every
# microbatch in flight) and 1F1B (one on the head's rank), with the native
# loss (the peer: the logits kept for the backward, as Megatron-LM's native
# cross-entropy keeps them) and the linear one. Prints each run's peak tensor
# memory on both pipeline ranks (measured by hypipe-run), tokens/s, the
# linear run's ratios to the native one, and the largest relative difference
# of their losses and gradient norms over the steps. The split is pinned
# (M*M-M*M|E, the native loss's balanced one): the linear loss's dearer
# backward would move the E layer to rank 0 and blur what the head saves.
# Usage: bench/run_linear_ce.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-10}
bin=${BIN:-$root/build/bin}
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
spec=$tmp/train-bench.yaml
sed -e 's/^  pattern: .*/  pattern: "M*M-M*M|E"/' \
  -e "s|^  path: .*|  path: $root/examples/data/licenses.txt|" \
  "$root/bench/specs/train-bench.yaml" > "$spec"

echo "hypipe $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, $steps steps, train-bench bf16, pp 2, 8 microbatches"
printf '%-14s %-7s %10s %10s %10s %10s\n' config loss "rank 0 MiB" "rank 1 MiB" tokens/s "max diff"
for config in gpipe-v8192 1f1b-v8192 gpipe-v32768 1f1b-v32768; do
  schedule=${config%%-*} vocab=${config##*-v}
  for loss in native linear; do
    "$bin/hypipe" compile "$spec" --pp 2 --microbatches 8 --schedule "$schedule" --dtype bf16 \
      --make-vocab-size-divisible-by "$vocab" --cross-entropy-fusion-impl "$loss" \
      -o "$tmp/$config-$loss" > /dev/null
    # Each rank's peak tensor memory, from hypipe-run's summary line.
    "${mpirun[@]}" "$bin/hypipe-run" "$tmp/$config-$loss" --steps "$steps" \
      --json-log "$tmp/$config-$loss.jsonl" | grep 'memory per rank' > "$tmp/$config-$loss.mem"
  done
  /usr/bin/python3 - "$tmp" "$config" <<'PY'
import json, sys
tmp, config = sys.argv[1:3]
def log(loss):
    return [json.loads(l) for l in open("%s/%s-%s.jsonl" % (tmp, config, loss))]
figures = {}
for loss in ["native", "linear"]:
    rows = log(loss)
    timed = rows[1:] or rows
    tps = sum(r["tokens"] for r in timed) / sum(r["tokens"] / r["tokens_per_s"] for r in timed)
    # "memory per rank (MiB): tensors R0 R1 | peak RSS ..."
    line = open("%s/%s-%s.mem" % (tmp, config, loss)).read()
    peaks = [float(x) for x in line.split("tensors")[1].split("|")[0].split()]
    figures[loss] = (peaks, tps)
    diff = ""
    if loss == "linear":
        worst = max(abs(a[k] - b[k]) / abs(a[k]) for a, b in zip(log("native"), rows)
                    for k in ("loss", "grad_norm"))
        diff = "%.1e" % worst
    print("%-14s %-7s %10.1f %10.1f %10.0f %10s" % (config, loss, peaks[0], peaks[1], tps, diff))
(p, t), (q, u) = figures["linear"], figures["native"]
print("%-14s linear / native: memory rank 0 %.2fx, rank 1 %.2fx, tokens/s %.2fx"
      % (config, p[0] / q[0], p[1] / q[1], t / u))
PY
done
