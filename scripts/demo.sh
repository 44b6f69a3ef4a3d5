#!/usr/bin/env bash
# README command 1: set up, build, and run the main job on the bundled example:
# show its stage table, compile it (its four segments on one CPU rank, vpp 4)
# and train it for 200 steps.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"$root/build/bin/hypipe" explain "$root/examples/hybrid-tiny.yaml"
out=${HYPIPE_DEMO_DIR:-/tmp/hypipe-demo}
rm -rf "$out"
"$root/build/bin/hypipe" compile "$root/examples/hybrid-tiny.yaml" --pp 1 --vpp 4 -o "$out/hybrid-tiny.hpa"
"$root/build/bin/hypipe-run" "$out/hybrid-tiny.hpa" --steps 200 --json-log "$out/log.jsonl"
