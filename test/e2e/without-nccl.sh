#!/bin/bash
# Runs a command with every copy of NCCL on this machine out of sight (inside
# `unshare -m`: each libnccl.so* file read as /dev/null, the mounts gone with
# the namespace), as on a GPU node that has no NCCL.
# Usage: unshare -m test/e2e/without-nccl.sh CMD...
set -euo pipefail
shopt -s nullglob
cuda=${CUDA_HOME:-/usr/local/cuda}
for f in "$cuda"/lib64/libnccl.so* "$cuda"/targets/*/lib/libnccl.so* \
  /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/local/lib/libnccl.so*; do
  real=$(readlink -f "$f")
  [[ -f $real ]] && mount --bind /dev/null "$real"
done
exec "$@"
