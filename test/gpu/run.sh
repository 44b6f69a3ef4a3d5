#!/bin/bash
# ctest's gpu-reference (label gpu): the GPU checks of the CUDA target
# (scripts/gpu-check.sh) on this machine's build. Exit 77 (skipped) when no
# CUDA device is visible.
set -uo pipefail
build=${1:?usage: test/gpu/run.sh BUILD_DIR}
if ! nvidia-smi -L > /dev/null 2>&1 || [ "${CUDA_VISIBLE_DEVICES-x}" = "" ]; then
  echo "skipped: no CUDA device"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scripts/gpu-payload.sh "$work/payload.tar.xz" "$build" || exit 1
mkdir -p "$work/out"
scripts/gpu-check.sh "$work/payload.tar.xz" "$work/out" | tee "$work/log"
status=${PIPESTATUS[0]}
grep -q "MISMATCH\|ABOVE" "$work/log" && status=1
grep -q "ERROR SUMMARY: 0 errors" "$work/log" || status=1
exit $status
