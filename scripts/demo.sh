#!/usr/bin/env bash
# README command 1: set up, build, and run the main job on the bundled example:
# show its stage table, then `hypipe train` it — compile, launch its 2 pipeline
# ranks (pp 2 x vpp 2, interleaved 1F1B) with mpirun, train 200 steps on CPU,
# checkpoint, and print the summary (loss curve and traces in the run dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"$root/build/bin/hypipe" explain "$root/examples/hybrid-tiny.yaml"
out=${HYPIPE_DEMO_DIR:-/tmp/hypipe-demo}
rm -rf "$out"
"$root/build/bin/hypipe" train "$root/examples/hybrid-tiny.yaml" --run-dir "$out"
