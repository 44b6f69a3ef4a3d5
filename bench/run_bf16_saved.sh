#!/usr/bin/env bash
# bf16 saved tensors in two bytes (runtime/exec/SavedBuffers.h), after
# scripts/build.sh: bench/specs/train-bench.yaml over 2 pipeline ranks with 8
# microbatches a step, under GPipe (every microbatch in flight) and 1F1B,
# trained in fp32, in bf16 with the saved tensors in four bytes each
# (hypipe-run --saved-fp32: what hypipe did before) and in bf16 packed (the
# default); and GPipe again with the vocabulary padded to 8192
# (--make-vocab-size-divisible-by 8192: the head's T x vocab logits, the
# largest tensor a stage saves, on the last rank). Prints each run's peak
# tensor memory of both pipeline ranks (rank 0 holds the most microbatches,
# rank 1 the head; measured on the devices, as hypipe-run reports them),
# tokens/s, the packed run's ratios to --saved-fp32 (the peer: hypipe's bf16
# run as it was) and whether the two bf16 runs' losses and gradient norms
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
printf '%-12s %-16s %10s %10s %10s %8s\n' schedule run "rank 0 MiB" "rank 1 MiB" tokens/s bits
for schedule in gpipe 1f1b gpipe-v8192; do
  extra=(--schedule "${schedule%%-*}")
  [ "$schedule" = gpipe-v8192 ] && extra+=(--make-vocab-size-divisible-by 8192)
  "$bin/hypipe" compile "$spec" --pp 2 --microbatches 8 "${extra[@]}" -o "$tmp/fp32-$schedule" > /dev/null
  "$bin/hypipe" compile "$spec" --pp 2 --microbatches 8 "${extra[@]}" --dtype bf16 -o "$tmp/bf16-$schedule" > /dev/null
  for run in fp32 bf16-saved-fp32 bf16-packed; do
    dir=$tmp/${run%%-*}-$schedule flag=()
    [ "$run" = bf16-saved-fp32 ] && flag=(--saved-fp32)
    # Each rank's peak tensor memory, from hypipe-run's summary line.
    "${mpirun[@]}" "$bin/hypipe-run" "$dir" --steps "$steps" "${flag[@]}" \
      --json-log "$tmp/$run-$schedule.jsonl" | grep 'memory per rank' > "$tmp/$run-$schedule.mem"
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
    # "memory per rank (MiB): tensors R0 R1 | peak RSS ..."
    line = open("%s/%s-%s.mem" % (tmp, run, schedule)).read()
    peaks = [float(x) for x in line.split("tensors")[1].split("|")[0].split()]
    figures[run] = (peaks, tps)
    bits = ""
    if run == "bf16-packed":
        ref = log("bf16-saved-fp32")
        same = [(r["loss"], r["grad_norm"]) for r in rows] == [(r["loss"], r["grad_norm"]) for r in ref]
        bits = "same" if same else "DIFFERENT"
    print("%-12s %-16s %10.1f %10.1f %10.0f %8s" % (schedule, run, peaks[0], peaks[1], tps, bits))
(p, t), (q, u) = figures["bf16-packed"], figures["bf16-saved-fp32"]
print("%-12s packed / saved-fp32: memory rank 0 %.2fx, rank 1 %.2fx, tokens/s %.2fx"
      % (schedule, p[0] / q[0], p[1] / q[1], t / u))
PY
done
