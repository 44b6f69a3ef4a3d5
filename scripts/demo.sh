#!/usr/bin/env bash
# README command 1: set up, build, and run the main job on the bundled example.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
"$root/build/bin/hypipe" explain "$root/examples/hybrid-tiny.yaml"
