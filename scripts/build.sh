#!/usr/bin/env bash
# Configures and builds hypipe into build/ (Ninja, ccache when present).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HYPIPE_BUILD_DIR:-$root/build}
jobs=${HYPIPE_JOBS:-$(nproc)}
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${HYPIPE_BUILD_TYPE:-Release} "$@"
fi
cmake --build "$build" -j "$jobs"
