#!/bin/bash
# Copies hypipe-run and the shared libraries it needs that a GPU node may
# lack (OpenBLAS, Open MPI, fmt, hypipe's kernels) into DIR, so a build made
# here runs there: DIR/bin/hypipe-run (a wrapper that puts DIR/lib and the
# node's CUDA libraries on the library path: DIR/env.sh) and DIR/lib. The
# C/C++ runtime (glibc, libstdc++) and the CUDA libraries (cuBLAS, and NCCL,
# which hypipe-run loads only when a run uses it) come from the node.
# With --with-mpi, DIR/mpi is Open MPI relocated (mpirun for a node without
# MPI: `source DIR/mpi/env.sh && mpirun -np 4 DIR/bin/hypipe-run ART`).
# Usage: scripts/bundle.sh DIR [BUILD_DIR] [--with-mpi]   (docs/cuda.md)
set -euo pipefail
withMpi=0
args=()
for a in "$@"; do
  if [[ $a == --with-mpi ]]; then withMpi=1; else args+=("$a"); fi
done
out=${args[0]:?usage: scripts/bundle.sh DIR [BUILD_DIR] [--with-mpi]}
build=${args[1]:-$(dirname "$0")/../build}
exe="$build/bin/hypipe-run"
[ -x "$exe" ] || { echo "error: $exe not built; run cmake --build $build first" >&2; exit 1; }
mkdir -p "$out/bin" "$out/lib" "$out/libexec"
cp "$exe" "$out/libexec/hypipe-run"
# Every library ldd resolves, but the node's own: the C runtime, the
# dynamic loader, the driver and the CUDA toolkit.
ldd "$exe" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcuda.so*|libcublas*|libcudart*|libnccl*)
      ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
# env.sh: the library path every wrapper of the bundle runs under.
cat > "$out/env.sh" <<'ENV'
# Sourced by the bundle's wrappers with $here set to the bundle: sets
# LD_LIBRARY_PATH to the bundle's lib/, OpenBLAS unpacked outside the bundle
# when it travels compressed (lib/libopenblas.so.0.xz, unpacked once into a
# private folder under $TMPDIR), the node's CUDA toolkit, what was on the path
# before, and last the NCCL, cuDNN and CUDA runtime of the node's Python
# environments (the nvidia-nccl, nvidia-cudnn and nvidia-cuda-runtime packages
# PyTorch brings; cuDNN's fused attention opens libcudart.so.13), for a node
# that has them nowhere else.
cuda=${CUDA_HOME:-/usr/local/cuda}
path="$here/lib"
if [ -f "$here/lib/libopenblas.so.0.xz" ] && [ ! -f "$here/lib/libopenblas.so.0" ]; then
  sum=$(cksum < "$here/lib/libopenblas.so.0.xz" | cut -d' ' -f1)
  blas="${TMPDIR:-/tmp}/hypipe-$(id -u)-openblas-$sum"
  if [ ! -f "$blas/libopenblas.so.0" ]; then
    mkdir -p -m 700 "$blas" || exit 1
    part="$blas/.part.$$"
    if command -v xz > /dev/null; then
      xz -dc "$here/lib/libopenblas.so.0.xz" > "$part"
    else
      python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' \
        "$here/lib/libopenblas.so.0.xz" > "$part"
    fi && mv "$part" "$blas/libopenblas.so.0" || {
      echo "error: cannot unpack $here/lib/libopenblas.so.0.xz into $blas" >&2
      exit 1
    }
  fi
  [ -O "$blas" ] || { echo "error: $blas is not this user's: set TMPDIR" >&2; exit 1; }
  path="$path:$blas"
fi
path="$path:$cuda/lib64:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
python=$(command -v python3 || true)
for site in "${python%/bin/python3}"/lib/python3*/site-packages /opt/*/.venv/lib/python3*/site-packages \
  /usr/local/lib/python3*/dist-packages "$HOME"/.local/lib/python3*/site-packages; do
  for lib in nccl cudnn cu13; do
    [ -d "$site/nvidia/$lib/lib" ] && path="$path:$site/nvidia/$lib/lib"
  done
done
export LD_LIBRARY_PATH="$path"
ENV
# bin/hypipe-run: the binary under that path; HYPIPE_RUN_UNDER names a tool
# to run it under (compute-sanitizer: the binary, not this script, is what
# it must see).
cat > "$out/bin/hypipe-run" <<'WRAP'
#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/env.sh"
exec ${HYPIPE_RUN_UNDER:-} "$here/libexec/hypipe-run" "$@"
WRAP
chmod +x "$out/bin/hypipe-run"
if ((withMpi)); then
  "$(dirname "$0")/gpu-kit/relocate-mpi.sh" "$out/mpi"
fi
du -sh "$out" | awk '{print "bundle: " $1 " in '"$out"'"}'
