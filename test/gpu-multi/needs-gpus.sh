#!/bin/bash
# Runs a command when this node has at least N GPUs; skips (77) otherwise.
# ctest -L gpu-multi on a node with several GPUs runs NCCL between ranks,
# which the lent one-GPU machines never can (docs/cuda.md).
# usage: needs-gpus.sh N COMMAND...
set -u
need=$1
shift
have=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
if ((have < need)); then
  echo "skipped: needs $need GPUs, this node has ${have:-0}"
  exit 77
fi
exec "$@"
