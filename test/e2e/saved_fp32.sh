#!/bin/bash
# usage: saved_fp32.sh DIR RANKS SPEC [COMPILE OPTIONS...]
# Compiles SPEC in bf16 into DIR, runs 2 steps on RANKS ranks with the saved
# tensors packed (the default) and with --saved-fp32, and prints
# compare_logs.py's verdict on the two logs (bit for bit) and both runs'
# peak tensor bytes (the largest rank's, from the JSON logs).
set -euo pipefail
dir=$1 ranks=$2 spec=$3
shift 3
here=$(dirname "$0")
hypipe compile "$spec" --dtype bf16 "$@" -o "$dir" > /dev/null
launch=()
if [ "$ranks" -gt 1 ]; then
  launch=(mpirun --allow-run-as-root --oversubscribe -np "$ranks")
fi
"${launch[@]}" hypipe-run "$dir" --steps 2 -q --json-log "$dir.packed.jsonl" > /dev/null
"${launch[@]}" hypipe-run "$dir" --steps 2 -q --saved-fp32 --json-log "$dir.fp32.jsonl" > /dev/null
python3 "$here/compare_logs.py" "$dir.fp32.jsonl" "$dir.packed.jsonl" tail 2
python3 - "$dir.packed.jsonl" "$dir.fp32.jsonl" <<'PY'
import json, sys
peak = [max(json.loads(l)["peak_tensor_bytes"] for l in open(f)) for f in sys.argv[1:]]
print("peak tensor bytes: packed %d, fp32 %d (%s)" % (
    peak[0], peak[1], "packed below fp32" if peak[0] < peak[1] else "NOT BELOW"))
sys.exit(0 if peak[0] < peak[1] else 1)
PY
