#!/bin/bash
# Builds what scripts/gpu-check.sh runs on a GPU node, here (where MLIR,
# OpenBLAS and MPI are): the runtime bundle, cuda artifacts of the reference
# specs, the bundled example and the packed example, and the CPU target's
# one-step dumps of the reference specs to compare with.
# Usage: scripts/gpu-payload.sh OUT.tar.xz [BUILD_DIR]   (docs/cuda.md)
set -euo pipefail
out=${1:?usage: scripts/gpu-payload.sh OUT.tar.xz [BUILD_DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build}
hypipe="$build/bin/hypipe"
g=$(mktemp -d)
trap 'rm -rf "$g"' EXIT
"$root/scripts/bundle.sh" "$g/bundle" "$build" > /dev/null
mkdir -p "$g/art" "$g/cpu"
for s in all-kinds untied-rope gelu; do
  spec="$root/test/e2e/Inputs/ref-$s.yaml"
  "$hypipe" compile "$spec" --target cuda -o "$g/art/$s" > /dev/null
  "$hypipe" compile "$spec" -o "$g/cpuart-$s" > /dev/null
  "$build/bin/hypipe-run" "$g/cpuart-$s" --steps 1 --dump-step "$g/cpu/$s.safetensors" -q > /dev/null
done
"$hypipe" compile "$root/examples/hybrid-tiny.yaml" --pp 1 --vpp 4 --target cuda -o "$g/art/tiny" > /dev/null
"$hypipe" compile "$root/examples/packed-sft.yaml" --pp 1 --vpp 4 --target cuda -o "$g/art/packed" > /dev/null
tar cJf "$out" -C "$g" bundle art cpu
echo "payload: $(du -h "$out" | cut -f1) in $out"
