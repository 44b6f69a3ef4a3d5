#!/usr/bin/env bash
# bf16 saved tensors in two bytes (runtime/exec/SavedBuffers.h), after
# scripts/build.sh: bench/specs/train-bench.yaml over 2 pipeline ranks with 8
# microbatches a step, under GPipe (every microbatch in flight) and 1F1B,
# trained in fp32, in bf16 with the saved tensors in four bytes each
# (hypipe-run --saved-fp32: what hypipe did before) and in bf16 packed (the
# default). Prints each run's peak tensor memory of pipeline rank 0 (the one
# holding the most microbatches; measured on the device, from its JSON log),
# tokens/s, the packed run's ratios to --saved-fp32 (the peer: hypipe's bf16
# run as it was), and whether the two bf16 runs' losses and gradient norms
# are the same bits at every step.
# Usage: bench/run_bf16_saved.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-10}
bin=${BIN:-$root/build/bin}
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 2)
spec=$root/bench/specs/train-bench.yaml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "hypipe $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, $steps steps, train-bench, pp 2, 8 microbatches"
printf '%-8s %-16s %18s %10s %8s\n' schedule run "rank 0 peak MiB" tokens/s bits
for schedule in gpipe 1f1b; do
  "$bin/hypipe" compile "$spec" --pp 2 --microbatches 8 --schedule "$schedule" -o "$tmp/fp32-$schedule" > /dev/null
  "$bin/hypipe" compile "$spec" --pp 2 --microbatches 8 --schedule "$schedule" --dtype bf16 -o "$tmp/bf16-$schedule" > /dev/null
  for run in fp32 bf16-saved-fp32 bf16-packed; do
    dir=$tmp/${run%%-*}-$schedule flag=()
    [ "$run" = bf16-saved-fp32 ] && flag=(--saved-fp32)
    "${mpirun[@]}" "$bin/hypipe-run" "$dir" --steps "$steps" -q "${flag[@]}" \
      --json-log "$tmp/$run-$schedule.jsonl" > /dev/null
  done
  /usr/bin/python3 - "$tmp" "$schedule" "$bin" <<'PY'
import json, sys
tmp, schedule, bin = sys.argv[1:4]
def log(run):
    return [json.loads(l) for l in open("%s/%s-%s.jsonl" % (tmp, run, schedule))]
figures = {}
for run in ["fp32", "bf16-saved-fp32", "bf16-packed"]:
    rows = log(run)
    timed = rows[1:] or rows
    tps = sum(r["tokens"] for r in timed) / sum(r["tokens"] / r["tokens_per_s"] for r in timed)
    peak = max(r["peak_tensor_bytes"] for r in rows) / 2**20
    figures[run] = (peak, tps)
    bits = ""
    if run == "bf16-packed":
        ref = log("bf16-saved-fp32")
        same = [(r["loss"], r["grad_norm"]) for r in rows] == [(r["loss"], r["grad_norm"]) for r in ref]
        bits = "same" if same else "DIFFERENT"
    print("%-8s %-16s %18.2f %10.0f %8s" % (schedule, run, peak, tps, bits))
(p, t), (q, u) = figures["bf16-packed"], figures["bf16-saved-fp32"]
print("%-8s packed / saved-fp32: memory %.2fx, tokens/s %.2fx" % (schedule, p / q, t / u))
PY
done
