#!/usr/bin/env bash
# Configures and builds hypipe into build/ (Ninja, ccache when present).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HYPIPE_BUILD_DIR:-$root/build}
jobs=${HYPIPE_JOBS:-$(nproc)}
venv=${HYPIPE_VENV:-$HOME/.cache/hypipe/venv}
# A tree configured before scripts/python-env.sh installed the cudnn-frontend
# headers (the train command builds without the test environment) is
# configured again once they are there, so that cuDNN's fused attention and
# its tests are built (runtime/kernels/cuda/CMakeLists.txt).
frontend_arrived() {
  grep -q '^HYPIPE_CUDNN_FRONTEND_INCLUDE:PATH=.*NOTFOUND' "$build/CMakeCache.txt" 2> /dev/null &&
    compgen -G "$venv/lib/python3*/site-packages/include/cudnn_frontend.h" > /dev/null
}
if [[ ! -f "$build/build.ninja" ]] || frontend_arrived; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${HYPIPE_BUILD_TYPE:-Release} "$@"
fi
cmake --build "$build" -j "$jobs"
