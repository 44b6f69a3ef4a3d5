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
# link) beside the measured one; then the same layouts of
# bench/specs/tp-bench-gd.yaml (G and D layers). No peer: PyTorch's tensor parallelism needs
# torch.distributed's process groups, which this benchmark does not set up.
# Usage: bench/run_tensor_parallel.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$root/build/bin/bench-sgemm" --core)}
steps=${1:-8}
spec="$root/bench/specs/tp-bench.yaml"
# shellcheck source=bench/layout_table.sh
source "$root/bench/layout_table.sh"
layout_table "$spec" "$steps" \
  "tp=1|1|--tp 1" \
  "tp=2|2|--tp 2" \
  "tp=2 sp|2|--tp 2 --sequence-parallel" \
  "pp=2|2|--pp 2 --schedule 1f1b"
# The same layouts of bench/specs/tp-bench-gd.yaml (GD-GD-: Gated DeltaNet
# and DeepSeek sparse attention, whose indexer every rank runs whole).
echo
echo "tp-bench-gd.yaml (GD-GD-):"
layout_table "$root/bench/specs/tp-bench-gd.yaml" "$steps" \
  "tp=1|1|--tp 1" \
  "tp=2|2|--tp 2" \
  "tp=2 sp|2|--tp 2 --sequence-parallel" \
  "pp=2|2|--pp 2 --schedule 1f1b"
