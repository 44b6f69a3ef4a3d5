#!/usr/bin/env bash
# Training throughput (after scripts/build.sh): hypipe-run against eager
# PyTorch written for speed (bench/peer_train.py) training the same model,
# same thread count, alternating in one run, and each at its fastest thread
# count; model FLOP/s as a fraction of this machine's OpenBLAS sgemm rate;
# hypipe's time by kernel class.
# Models: bench/specs/train-bench.yaml and bench/specs/train-issue.yaml (the
# CPU-speed issue's 3.77M-parameter M*M-M*ME), or the specs in $SPECS.
# Every process uses the OpenBLAS core hypipe-run picks (bench-sgemm --core:
# a virtual machine's hidden CPU model otherwise makes OpenBLAS, and so
# PyTorch's BLAS, fall back to SSE3 kernels) and OpenBLAS thread timeout.
# Usage: bench/run_train.sh [steps] [threads...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# BIN: the hypipe, hypipe-run and bench-sgemm to measure (another build, to compare two).
bin=${BIN:-$root/build/bin}
steps=${1:-10}
shift || true
threads=("${@:-1 2}")
read -r -a threads <<< "${threads[*]}"
specs=${SPECS:-"$root/bench/specs/train-bench.yaml $root/bench/specs/train-issue.yaml"}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$bin/bench-sgemm" --core)}
# PyTorch's OpenBLAS threads sleep soon after each GEMM (hypipe's OpenBLAS
# runs on one thread; gemm() shares large GEMMs over hypipe's threads).
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
echo "OpenBLAS core: $OPENBLAS_CORETYPE (hypipe-run, bench-sgemm and PyTorch alike), thread timeout $OPENBLAS_THREAD_TIMEOUT"
tmp=$(mktemp -d)
for spec in $specs; do
  name=$(basename "$spec" .yaml)
  art=$tmp/$name.hpa
  "$bin/hypipe" compile "$spec" -o "$art" > /dev/null
  gflop=$("$bin/hypipe" explain "$spec" --json |
    /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(s["forward_flops"]+s["backward_input_flops"]+s["backward_weight_flops"] for s in d["stages"])*d["microbatches"]/1e9)')
  tokens=$(/usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); t=m["training"]; print(t["micro_batch_size"]*t["seq_length"]*m["parallel"]["microbatches"])' "$art/manifest.json")
  echo
  echo "model: $name ($spec), $gflop GFLOP per step of $tokens tokens"
  printf '%-8s %14s %14s %8s %12s %12s  %s\n' threads "hypipe tok/s" "PyTorch tok/s" ratio "model GF/s" "% of sgemm" "hypipe step time by class"
  bestHyp=0 bestHypT=0 bestPeer=0 bestPeerT=0
  for t in "${threads[@]}"; do
    sgemm=$("$bin/bench-sgemm" "$t")
    out=$(OMP_NUM_THREADS=$t "$bin/hypipe-run" "$art" --steps $((steps + 1)) --threads "$t" \
          --json-log "$tmp/$name-log-$t.jsonl" --profile -q)
    classes=$(awk '/^profile /{on=1; next} on && /steps/ {on=0} on { n=split($0, f, /  +/); sub(/%$/, "", f[n]); if (f[n] + 0 >= 3) printf "%s %s%%, ", f[1], f[n] }' <<< "$out")
    hyp=$(/usr/bin/python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][1:]; print("%.1f" % (len(r)*'"$tokens"'/sum('"$tokens"'/x["tokens_per_s"] for x in r)))' "$tmp/$name-log-$t.jsonl")
    read -r peer _ < <(/usr/bin/python3 "$root/bench/peer_train.py" "$art" "$t" "$steps")
    awk -v t="$t" -v h="$hyp" -v p="$peer" -v g="$gflop" -v s="$sgemm" -v c="${classes%, }" -v n="$tokens" \
      'BEGIN { gfs = g * h / n; printf "%-8s %14.0f %14.0f %7.2fx %12.1f %11.1f%%  %s\n", t, h, p, h / p, gfs, 100 * gfs / s, c }'
    echo "  (sgemm 1024^3 at $t threads: $sgemm GFLOP/s)"
    if awk -v a="$hyp" -v b="$bestHyp" 'BEGIN { exit !(a > b) }'; then bestHyp=$hyp bestHypT=$t; fi
    if awk -v a="$peer" -v b="$bestPeer" 'BEGIN { exit !(a > b) }'; then bestPeer=$peer bestPeerT=$t; fi
  done
  # A user runs each at its fastest thread count: the ratio that counts.
  awk -v h="$bestHyp" -v ht="$bestHypT" -v p="$bestPeer" -v pt="$bestPeerT" \
    'BEGIN { printf "best of each: hypipe %.0f tok/s at %d threads, PyTorch %.0f at %d: %.2fx\n", h, ht, p, pt, h / p }'
done
