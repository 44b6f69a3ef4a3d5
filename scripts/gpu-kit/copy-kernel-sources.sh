#!/usr/bin/env bash
# Copies the CUDA kernel library's sources, and the repository headers they
# include, into DIR with the repository's paths, and writes DIR/rebuild.sh:
# on a GPU node (nvcc, cuBLAS; no CMake or MLIR) it rebuilds
# libhypipe_kernels_cuda.so with the flags CMake uses and puts it where the
# kit's hypipe-run loads it, so a kernel can be fixed and re-run in place.
# Usage: scripts/gpu-kit/copy-kernel-sources.sh ROOT DIR
set -euo pipefail
root=${1:?usage: copy-kernel-sources.sh ROOT DIR}
out=${2:?usage: copy-kernel-sources.sh ROOT DIR}
nvcc=${NVCC:-/usr/local/cuda/bin/nvcc}
mkdir -p "$out"
sources=$(cd "$root" && ls runtime/kernels/cuda/*.cu)
for s in $sources; do
  # nvcc -M lists every header the file includes; keep the repository's.
  (cd "$root" && "$nvcc" -M -std=c++17 -I. -DHYPIPE_HAVE_CUDA -DHYPIPE_HAVE_FUSED_ATTENTION "$s") |
    tr -s ' \\' '\n' | sed -n 's|^\./||; /^[a-z].*\.\(h\|cuh\|cu\|inc\)$/p' | sort -u
done | sort -u | while read -r f; do
  [[ -f $root/$f ]] || continue
  mkdir -p "$out/$(dirname "$f")"
  cp "$root/$f" "$out/$f"
done
cat > "$out/rebuild.sh" << 'REBUILD'
#!/usr/bin/env bash
# Rebuilds the kit's CUDA kernel library from these sources with nvcc (the
# flags of runtime/kernels/cuda/CMakeLists.txt) into ../bundle/lib, where the
# kit's hypipe-run loads it. Edit a .cu file here, run this, run the suite.
# Usage: kernels/rebuild.sh   (HYPIPE_JOBS=N: parallel nvcc runs, default nproc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-${CUDA_HOME:-/usr/local/cuda}/bin/nvcc}
jobs=${HYPIPE_JOBS:-$(nproc)}
objs=$(mktemp -d)
trap 'rm -rf "$objs"' EXIT
lib="$here/../bundle/lib"
flags=(-O3 -DNDEBUG -std=c++17 -Xcompiler=-fPIC -DHYPIPE_HAVE_CUDA -I"$here"
  -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90)
# cuDNN's fused attention is a library of its own (built where the
# cudnn-frontend headers are): the kernels call it when the kit has it.
fused=()
if [[ -f $lib/libhypipe_fused_attention.so ]]; then
  flags+=(-DHYPIPE_HAVE_FUSED_ATTENTION)
  fused=(-L"$lib" -lhypipe_fused_attention)
fi
ls "$here"/runtime/kernels/cuda/*.cu | xargs -P "$jobs" -I{} sh -c \
  '"$0" "$@" -c "{}" -o "'"$objs"'/$(basename "{}" .cu).o"' "$nvcc" "${flags[@]}"
"$nvcc" -shared -o "$lib/libhypipe_kernels_cuda.so" "$objs"/*.o \
  "${fused[@]}" -lcublas -lcublasLt -cudart static
echo "rebuilt $lib/libhypipe_kernels_cuda.so"
REBUILD
chmod +x "$out/rebuild.sh"
echo "kernels: $(find "$out" -type f | wc -l) files in $out"
