#!/usr/bin/env bash
# Training throughput (after scripts/build.sh): hypipe-run against eager
# PyTorch training the same model (bench/specs/train-bench.yaml: M*M-M*ME,
# hidden 256, seq 256, micro-batch 4), same thread count, in one run; model
# FLOP/s as a fraction of this machine's OpenBLAS sgemm rate; GEMM share.
# Usage: bench/run_train.sh [steps] [threads...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-10}
shift || true
threads=("${@:-1 2}")
read -r -a threads <<< "${threads[*]}"
art=$(mktemp -d)/train-bench.hpa
"$root/build/bin/hypipe" compile "$root/bench/specs/train-bench.yaml" -o "$art" > /dev/null
gflop=$("$root/build/bin/hypipe" explain "$root/bench/specs/train-bench.yaml" --json |
  /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(s["forward_flops"]+s["backward_input_flops"]+s["backward_weight_flops"] for s in d["stages"])*d["microbatches"]/1e9)')
tokens=1024
printf '%-8s %14s %14s %8s %12s %14s %12s\n' threads "hypipe tok/s" "PyTorch tok/s" ratio "model GF/s" "% of sgemm" "GEMM share"
for t in "${threads[@]}"; do
  sgemm=$("$root/build/bin/bench-sgemm" "$t")
  out=$(OMP_NUM_THREADS=$t "$root/build/bin/hypipe-run" "$art" --steps $((steps + 1)) --threads "$t" \
        --json-log "$art/log-$t.jsonl" --profile -q)
  share=$(sed -n 's/.*= \([0-9.]*\)% of step time/\1/p' <<< "$out")
  hyp=$(/usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][1:]; print("%.1f" % (len(r)*'"$tokens"'/sum('"$tokens"'/x["tokens_per_s"] for x in r)))' "$art/log-$t.jsonl")
  read -r peer _ < <(/usr/bin/python3 "$root/bench/peer_train.py" "$art" "$t" "$steps")
  awk -v t="$t" -v h="$hyp" -v p="$peer" -v g="$gflop" -v s="$sgemm" -v sh="$share" -v n="$tokens" \
    'BEGIN { gfs = g * h / n; printf "%-8s %14.0f %14.0f %7.1fx %12.1f %13.1f%% %11s%%\n", t, h, p, h / p, gfs, 100 * gfs / s, sh }'
  echo "  (sgemm 1024^3 at $t threads: $sgemm GFLOP/s; model $gflop GFLOP per step of $tokens tokens)"
done
