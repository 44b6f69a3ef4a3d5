#!/bin/bash
# Copies hypipe-run and the shared libraries it needs that a GPU node may
# lack (OpenBLAS, Open MPI, fmt, hypipe's kernels) into DIR, so a build made
# here runs there: DIR/bin/hypipe-run (a wrapper that puts DIR/lib and the
# node's CUDA libraries on the library path) and DIR/lib. The C/C++ runtime
# (glibc, libstdc++) and the CUDA libraries (cuBLAS, NCCL) come from the node.
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
cat > "$out/bin/hypipe-run" <<'WRAP'
#!/bin/sh
here=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
export LD_LIBRARY_PATH="$here/lib:$cuda/lib64:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$here/libexec/hypipe-run" "$@"
WRAP
chmod +x "$out/bin/hypipe-run"
if ((withMpi)); then
  "$(dirname "$0")/gpu-kit/relocate-mpi.sh" "$out/mpi"
fi
du -sh "$out" | awk '{print "bundle: " $1 " in '"$out"'"}'
