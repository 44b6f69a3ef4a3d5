#!/usr/bin/env bash
# Expert parallelism on this machine (after scripts/build.sh): `hypipe train`
# of bench/specs/ep-bench.yaml (ME*EME-E, hidden 256, 8 SwiGLU experts of 512,
# top-2, seq 256, micro-batch 4, 4 microbatches a step: 4,096 tokens) at
# tp 1 (one rank on every core), tp 2 with sequence parallelism and ep 1
# (every expert on both ranks, each split in half over its width: etp = tp),
# and tp 2 with ep 2 (each rank four whole experts: etp 1, the expert grid
# inside the tensor-parallel group), the last with the alltoall dispatcher
# (the routed rows exchanged rather than every token gathered), and dp 2 with ep 1 and
# with ep 2 (each replica four whole experts: the expert grid over the two data-
# parallel replicas, m = 2; two microbatches a replica keep the global batch), the
# last also with the distributed optimizer (the experts' moments over the
# expert-data-parallel group, the rest over dp). Then the same model on packed
# samples (bench/specs/ep-bench-packed.yaml) at dp 2 with ep 1 and ep 2: over
# the replicas each replica's microbatch is padded to its group's most rows.
# Last the model with a capacity factor of 1 (Megatron-LM's
# --moe-expert-capacity-factor 1) at tp 2 with ep 1 and ep 2 and at dp 2 with
# ep 2: a rank keeps room for its experts' capacities alone (MoeShape::heldRows),
# so the expert grid's activation memory falls where dropless it cannot.
# Per layout the table of
# bench/layout_table.sh: tokens/s and its ratio to the first layout, rank 0's
# peak tensor MiB, the last loss, the measured step beside `hypipe explain
# --device cpu`'s prediction. No peer: PyTorch has no expert parallelism of
# its own, and Megatron-LM's needs torch.distributed and GPUs.
# Usage: bench/run_expert_parallel.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$root/build/bin/bench-sgemm" --core)}
steps=${1:-8}
# shellcheck source=bench/layout_table.sh
source "$root/bench/layout_table.sh"
layout_table "$root/bench/specs/ep-bench.yaml" "$steps" \
  "tp=1|1|--tp 1" \
  "tp=2 sp ep=1|2|--tp 2 --sequence-parallel --ep 1" \
  "tp=2 sp ep=2|2|--tp 2 --sequence-parallel --ep 2 --etp 1" \
  "ep=2 alltoall|2|--tp 2 --sequence-parallel --ep 2 --etp 1 --moe-token-dispatcher-type alltoall" \
  "dp=2 ep=1|2|--dp 2 --microbatches 2" \
  "dp=2 ep=2|2|--dp 2 --microbatches 2 --ep 2 --etp 1" \
  "dp=2 ep=2 dist|2|--dp 2 --microbatches 2 --ep 2 --etp 1 --distributed-optimizer"
echo
layout_table "$root/bench/specs/ep-bench-packed.yaml" "$steps" \
  "packed dp=2|2|--dp 2" \
  "packed ep=2|2|--dp 2 --ep 2 --etp 1"
echo
layout_table "$root/bench/specs/ep-bench.yaml" "$steps" \
  "cap=1 tp=2 ep=1|2|--tp 2 --sequence-parallel --ep 1 --moe-expert-capacity-factor 1" \
  "cap=1 tp=2 ep=2|2|--tp 2 --sequence-parallel --ep 2 --etp 1 --moe-expert-capacity-factor 1" \
  "cap=1 dp=2 ep=1|2|--dp 2 --microbatches 2 --moe-expert-capacity-factor 1" \
  "cap=1 dp=2 ep=2|2|--dp 2 --microbatches 2 --ep 2 --etp 1 --moe-expert-capacity-factor 1"
