#!/usr/bin/env bash
# Activation recompute's memory and time (after scripts/build.sh): trains
# each layout without recompute, with full recompute (uniform chunks of 1
# and 4, block 1) and with selective recompute (the attention core, the MLPs
# and the norms) through `hypipe train`, and prints per setting the
# measured peak tensor MiB of every pipeline rank (summary.json's
# memory_mib[r].tensors) beside the estimate of `hypipe explain`
# (runtime_memory_bytes), the mean tokens/s of the steps after the first,
# the step time recompute adds against no recompute (measured, and as the
# simulator predicts it from the cost model's FLOPs: `hypipe explain`'s
# makespan), and the last loss (recompute runs every kernel on the values it
# saw without: the same loss). The settings alternate, ROUNDS times;
# tokens/s is their mean, with the slowest and fastest round.
# This machine's cores are shared: a busy neighbour moves tokens/s by 2x
# between runs, while the memory columns are exact. Read the time on a quiet
# machine, and against the simulated column.
# Layouts: the bundled example (examples/hybrid-tiny.yaml: pp 2, vpp 2,
# interleaved 1F1B, 4 microbatches) and the test model of the layouts test
# (test/e2e/Inputs/dist.yaml) on pp 2 with GPipe and 8 microbatches, where
# every microbatch waits for its backward.
# Every rank runs one thread with the OpenBLAS core hypipe-run picks
# (bench-sgemm --core) and OpenBLAS's thread timeout, as run_train.sh.
# Usage: bench/run_recompute.sh [steps] [rounds]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/bin}
steps=${1:-60}
rounds=${2:-3}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$bin/bench-sgemm" --core)}
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
echo "OpenBLAS core: $OPENBLAS_CORETYPE, thread timeout $OPENBLAS_THREAD_TIMEOUT; $steps steps a run, $rounds rounds, 1 thread a rank"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

full() { echo "--recompute-granularity full --recompute-method $1 --recompute-num-layers $2"; }
layouts=(
  "hybrid-tiny|$root/examples/hybrid-tiny.yaml|"
  "dist-pp2-gpipe-m8|$root/test/e2e/Inputs/dist.yaml|--pp 2 --schedule gpipe --microbatches 8"
)
# Selective: the modules both layouts hold (neither's MoE, if any, is named:
# the bundled example has none); `--` ends the module list.
selective="--recompute-granularity selective --recompute-modules core_attn mlp layernorm --"
settings=("none|" "full uniform 1|$(full uniform 1)" "full uniform 4|$(full uniform 4)" "full block 1|$(full block 1)" "selective|$selective")

for layout in "${layouts[@]}"; do
  IFS='|' read -r name spec opts <<< "$layout"
  echo
  echo "layout: $name ($(basename "$spec") $opts)"
  declare -A tps=() mem=() est=() loss=() sim=()
  for ((round = 0; round < rounds; ++round)); do
    for i in "${!settings[@]}"; do
      IFS='|' read -r label flags <<< "${settings[$i]}"
      run=$tmp/$name-$i-$round
      # shellcheck disable=SC2086
      "$bin/hypipe" train "$spec" $opts $flags --steps "$steps" --threads 1 \
        --run-dir "$run" --no-save > /dev/null
      read -r t m l < <(/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["tokens_per_s"], ",".join("%.2f" % r["tensors"] for r in s["memory_mib"]), repr(s["last_loss"]))' "$run/summary.json")
      tps[$i]="${tps[$i]:-} $t"
      mem[$i]=$m
      loss[$i]=$l
      if [ "$round" = 0 ]; then
        # shellcheck disable=SC2086
        read -r est[$i] sim[$i] < <("$bin/hypipe" explain "$spec" $opts $flags --json |
          /usr/bin/python3 -c 'import json,sys; e=json.load(sys.stdin); print(",".join("%.2f" % (r["runtime_memory_bytes"] / 2**20) for r in e["ranks"]), e["simulation"]["makespan"])')
      fi
    done
  done
  printf '%-16s %-24s %-20s %-22s %11s %10s  %s\n' setting "peak tensor MiB by rank" "explain's estimate" "tokens/s (min-max)" "extra time" simulated "last loss"
  base="" simBase=""
  for i in "${!settings[@]}"; do
    IFS='|' read -r label flags <<< "${settings[$i]}"
    # shellcheck disable=SC2086
    read -r mean range < <(/usr/bin/python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; print("%.0f" % (sum(v)/len(v)), "(%.0f-%.0f)" % (min(v), max(v)))' ${tps[$i]})
    base=${base:-$mean}
    simBase=${simBase:-${sim[$i]}}
    extra=$(awk -v b="$base" -v t="$mean" 'BEGIN { printf "%+.1f%%", 100 * (b / t - 1) }')
    simulated=$(awk -v b="$simBase" -v t="${sim[$i]}" 'BEGIN { printf "%+.1f%%", 100 * (t / b - 1) }')
    printf '%-16s %-24s %-20s %-22s %11s %10s  %s\n' "$label" "${mem[$i]}" "${est[$i]}" "$mean $range" "$extra" "$simulated" "${loss[$i]}"
  done
  unset tps mem est loss sim
done
