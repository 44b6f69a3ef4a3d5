#!/usr/bin/env bash
# Sequence-length sweep (after scripts/build.sh): the CPU-speed issue's model
# (bench/specs/train-issue.yaml) at seq 256 ... 4096 with the same 4,096
# tokens per step; hypipe's time per token by kernel class (table) and
# docs/images/seq-sweep.svg. Mamba's scan and conv and every GEMM should be
# flat per token; attention grows linearly with the length.
# Usage: bench/run_seq_sweep.sh [steps] [threads]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$root/build/bin/bench-sgemm" --core)}
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
/usr/bin/python3 "$root/bench/seq_sweep.py" "$root/build/bin" "$root/bench/specs/train-issue.yaml" \
  4096 "${1:-3}" "${2:-1}" "$root/docs/images/seq-sweep.svg" 256 512 1024 2048 4096
