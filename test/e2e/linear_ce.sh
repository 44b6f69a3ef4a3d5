#!/bin/bash
# usage: linear_ce.sh DIR RANKS TOL CHUNK SPEC [COMPILE OPTIONS...]
# Compiles SPEC into DIR.native and DIR.linear (--cross-entropy-fusion-impl
# linear, with --cross-entropy-chunk-tokens CHUNK unless CHUNK is auto), runs 3 steps of each on RANKS ranks, and prints compare_logs.py's
# verdict (losses and gradient norms within TOL, relative) and both runs'
# peak tensor bytes (the largest rank's, from the JSON logs); fails if the
# linear run's peak is above the native one's.
set -euo pipefail
dir=$1 ranks=$2 tol=$3 chunk=$4 spec=$5
shift 5
linear=(--cross-entropy-fusion-impl linear)
if [ "$chunk" != auto ]; then
  linear+=(--cross-entropy-chunk-tokens "$chunk")
fi
here=$(dirname "$0")
hypipe compile "$spec" "$@" -o "$dir.native" > /dev/null
hypipe compile "$spec" "$@" "${linear[@]}" -o "$dir.linear" > /dev/null
launch=()
if [ "$ranks" -gt 1 ]; then
  launch=(mpirun --allow-run-as-root --oversubscribe -np "$ranks")
fi
for kind in native linear; do
  "${launch[@]}" hypipe-run "$dir.$kind" --steps 3 -q --json-log "$dir.$kind.jsonl" > /dev/null
done
python3 "$here/compare_logs.py" "$dir.native.jsonl" "$dir.linear.jsonl" within "$tol"
python3 - "$dir.linear.jsonl" "$dir.native.jsonl" <<'PY'
import json, sys
peak = [max(json.loads(l)["peak_tensor_bytes"] for l in open(f)) for f in sys.argv[1:]]
# (The largest rank's: with pipeline stages it may be a stage without the
# head, whose peak stays.)
verdict = ("linear below native" if peak[0] < peak[1] else
           "the same" if peak[0] == peak[1] else "ABOVE")
print("peak tensor bytes: linear %d, native %d (%s)" % (peak[0], peak[1], verdict))
sys.exit(0 if peak[0] <= peak[1] else 1)
PY
