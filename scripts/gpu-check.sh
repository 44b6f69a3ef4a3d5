#!/bin/bash
# The GPU checks of the CUDA target, run on a GPU node from the repository
# root with a payload made by scripts/gpu-payload.sh (bundle, cuda
# artifacts, CPU dumps): every kernel forward and backward through whole
# models against PyTorch (float64) and against the CPU target, training,
# packing, compute-sanitizer and a checkpoint for the CPU to resume.
# Usage: scripts/gpu-check.sh PAYLOAD.tar.xz OUT_DIR   (docs/cuda.md)
set -uo pipefail
payload=${1:?usage: scripts/gpu-check.sh PAYLOAD OUT}
out=${2:?usage: scripts/gpu-check.sh PAYLOAD OUT}
g=$(mktemp -d)
tar xJf "$payload" -C "$g"
run="$g/bundle/bin/hypipe-run"
data=examples/data/licenses.txt
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
for s in all-kinds untied-rope gelu; do
  echo "== $s: one step, every gradient"
  "$run" "$g/art/$s" --steps 1 --dump-step "$out/$s.safetensors" -q --data $data || status=1
  python3 test/reference/torch_reference.py "$g/art/$s" "$out/$s.safetensors" | grep -E "reference:|MISMATCH|max" | head -5
  python3 test/e2e/compare_dumps.py "$g/cpu/$s.safetensors" "$out/$s.safetensors" 1e-4 || status=1
done
echo "== hybrid-tiny, 200 steps"
"$run" "$g/art/tiny" --steps 200 --json-log "$out/tiny.jsonl" -q --data $data || status=1
echo "== packed-sft, 30 steps"
"$run" "$g/art/packed" --steps 30 --json-log "$out/packed.jsonl" -q || status=1
echo "== checkpoint after 10 steps"
"$run" "$g/art/tiny" --steps 10 --save "$g/ckpt" -q --data $data || status=1
tar cf "$out/ckpt.tar" -C "$g" ckpt
echo "== compute-sanitizer memcheck, one step"
LD_LIBRARY_PATH="$g/bundle/lib:/usr/local/cuda/lib64" compute-sanitizer --tool memcheck --leak-check no \
  "$g/bundle/libexec/hypipe-run" "$g/art/all-kinds" --steps 1 -q --data $data 2>&1 | tail -4
exit $status
