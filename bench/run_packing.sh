#!/usr/bin/env bash
# Sequence packing against padding (after scripts/build.sh): useful tokens/s
# of the mock lognormal SFT data packed into microbatches of 1,024 tokens,
# and of the same samples each padded to max_seq_len (the padded peer trains
# full 1,024-token rows; its useful tokens are the packed run's real tokens
# per step). Then the scheduler's time on a global batch of 100,000 samples.
# Usage: bench/run_packing.sh [steps] [threads]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-6}
threads=${2:-2}
bin="$root/build/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin/hypipe" compile "$root/bench/specs/packing-bench.yaml" -o "$work/packed" > /dev/null
"$bin/hypipe" compile "$root/bench/specs/padding-bench.yaml" -o "$work/padded" > /dev/null
"$bin/hypipe-run" "$work/packed" -q --steps "$steps" --threads "$threads" --json-log "$work/packed.jsonl" > /dev/null
"$bin/hypipe-run" "$work/padded" -q --steps "$steps" --threads "$threads" --json-log "$work/padded.jsonl" > /dev/null
/usr/bin/python3 - "$work/packed.jsonl" "$work/padded.jsonl" "$threads" <<'PY'
import json, sys
packed = [json.loads(l) for l in open(sys.argv[1])][1:]  # step 1 warms up
padded = [json.loads(l) for l in open(sys.argv[2])][1:]
real = sum(r["tokens"] for r in packed)
t_packed = sum(r["tokens"] / r["tokens_per_s"] for r in packed)
t_padded = sum(r["tokens"] / r["tokens_per_s"] for r in padded)
computed = sum(r["tokens"] for r in padded)
mbs = [r["microbatches"] for r in packed]
print("%-34s %14s %16s %12s" % ("run (%d steps, %s threads)" % (len(packed), sys.argv[3]),
                                "s per step", "useful tok/s", "ratio"))
print("%-34s %14.3f %16.0f %12s" % ("padded to max_seq_len 1024", t_padded / len(padded),
                                     real / t_padded, "1.00x"))
print("%-34s %14.3f %16.0f %11.2fx" % ("packed, 1024-token microbatches", t_packed / len(packed),
                                        real / t_packed, t_padded / t_packed))
print("padding avoided: %.1f%% of the padded run's %d tokens are padding; "
      "packed microbatches per step: %s" % (100.0 * (1 - real / computed), computed, mbs))
PY
"$bin/bench-packing"
