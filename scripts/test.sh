#!/usr/bin/env bash
# README command 2: set up, build, and run every test (lit + GoogleTest via ctest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
cd "${HYPIPE_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)"
