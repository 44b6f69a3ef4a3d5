#!/usr/bin/env bash
# bf16 on the CPU (docs/precision.md), after scripts/build.sh: the bundled
# example trained in fp32 and in bf16 for the same steps under mpirun (its
# pp 2), the last 10 steps' mean loss of each and their relative difference
# (issue 33 asks for 2% at 200 steps); then tokens/s, tensor memory per rank
# and the bytes all stages send for one microbatch (explain), fp32 against bf16 (the emulation's
# cost: rounding passes and a second parameter copy), on the example and on
# bench/specs/train-bench.yaml (one rank).
# Usage: bench/run_bf16.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-200}
bin=${BIN:-$root/build/bin}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() { # spec dtype ranks -> log and summary in $tmp
  local spec=$1 dtype=$2 np=$3 name
  name=$(basename "$spec" .yaml)-$dtype
  "$bin/hypipe" compile "$spec" --dtype "$dtype" -o "$tmp/$name" > /dev/null
  "${mpirun[@]}" -np "$np" "$bin/hypipe-run" "$tmp/$name" --steps "$steps" \
    --json-log "$tmp/$name.jsonl" > "$tmp/$name.out" 2>&1
  "$bin/hypipe" explain "$spec" --dtype "$dtype" --json > "$tmp/$name.explain.json"
}

summary() { # spec dtype
  local name
  name=$(basename "$1" .yaml)-$2
  /usr/bin/python3 - "$tmp/$name.jsonl" "$tmp/$name.out" "$tmp/$name.explain.json" "$2" <<'PY'
import json, re, sys
log, out, explain, dtype = sys.argv[1:5]
rows = [json.loads(l) for l in open(log)]
tail = rows[-10:]
loss = sum(r["loss"] for r in tail) / len(tail)
timed = rows[1:] or rows
tps = sum(r["tokens"] for r in timed) / sum(r["tokens"] / r["tokens_per_s"] for r in timed)
mem = re.search(r"tensors ([0-9. ]+)\|", open(out).read()).group(1).split()
sends = sum(s["send_bytes"] for s in json.load(open(explain))["stages"])
print("%s %.4f %.0f %s %d" % (dtype, loss, tps, "/".join(mem), sends))
PY
}

echo "hypipe $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, $steps steps"
for pair in "$root/examples/hybrid-tiny.yaml:2" "$root/bench/specs/train-bench.yaml:1"; do
  spec=${pair%:*} np=${pair#*:}
  run "$spec" fp32 "$np"
  run "$spec" bf16 "$np"
  read -r _ l32 t32 m32 s32 < <(summary "$spec" fp32)
  read -r _ l16 t16 m16 s16 < <(summary "$spec" bf16)
  echo
  echo "model: $(basename "$spec" .yaml) on $np rank(s)"
  printf '%-6s %16s %12s %26s %24s\n' dtype "loss (last 10)" "tokens/s" "tensor MiB per rank" "sent per microbatch (explain)"
  printf '%-6s %16s %12s %26s %24s\n' fp32 "$l32" "$t32" "$m32" "$s32 B"
  printf '%-6s %16s %12s %26s %24s\n' bf16 "$l16" "$t16" "$m16" "$s16 B"
  awk -v a="$l32" -v b="$l16" -v x="$t32" -v y="$t16" \
    'BEGIN { printf "bf16 - fp32 loss: %+.2f%% of fp32; bf16 emulation speed: %.2fx of fp32\n", 100 * (b - a) / a, y / x }'
done
