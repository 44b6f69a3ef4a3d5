#!/bin/sh
# The GPU kit's entry: a plan of checks, OUT/results.{json,md} and
# OUT/work.tar.gz. Usage: run.sh OUT [--deadline S] [--failed-in RESULTS.json]
# [--sync] [NAME...]   (names: plans default and all, suites, SUITE:CHECK;
# run.sh --plans lists them; docs/cuda.md, "The GPU kit")
here=$(cd "$(dirname "$0")" && pwd)
exec python3 "$here/run.py" "$@"
