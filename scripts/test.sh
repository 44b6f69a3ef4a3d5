#!/usr/bin/env bash
# README command 2: set up, build, and run every test (lit + GoogleTest via ctest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
# PyTorch 2 and transformers 5 for the interop tests, from the Python package
# index (the first time about 3 GB, 2 to 5 minutes). Without the index the
# tests that need them are reported UNSUPPORTED, and this says so.
"$root/scripts/python-env.sh" || echo "test.sh: warning: no PyTorch 2 /" \
  "transformers environment (scripts/python-env.sh failed above): the" \
  "transformers interop tests will be UNSUPPORTED" >&2
"$root/scripts/build.sh"
cd "${HYPIPE_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)"
