#!/bin/sh
# The GPU kit's entry: every suite (or those named), OUT/results.{json,md}.
# Usage: run.sh OUT [SUITE...]   (suites: environment correctness probes
# baselines bench; docs/cuda.md, "The GPU kit")
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/run.py" "$@"
