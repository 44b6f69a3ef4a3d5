#!/usr/bin/env bash
# hypipe plan's predictions against measured runs (issue 35), after
# scripts/build.sh: for each spec, one single-rank run measures the layer
# costs (hypipe-run --costs-out, 1 thread), then every layout below is
# predicted (`hypipe explain --costs`: the schedule simulated in seconds,
# transfers and gradient reduction free; and with --device cpu besides:
# the same compute, with the pipeline hand-offs and the data-parallel
# reductions timed on the cpu row's links, docs/plan.md) and run under mpirun with one
# thread a rank (2 ranks at most: this machine's cores), its tokens/s the
# median of the steps after the first. Prints predicted, measured and their
# ratio per layout, whether the predicted order is the measured one (pairs
# within 5% of each other excepted), and how the layout predicted fastest on
# the most ranks measures against the fastest measured there.
# Usage: bench/run_plan.sh [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-40}
bin=${BIN:-$root/build/bin}
mpirun=(mpirun --allow-run-as-root --oversubscribe)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dist="$root/test/e2e/Inputs/dist.yaml"
tiny="$root/examples/hybrid-tiny.yaml"
# spec | measured on | layouts (name:ranks:overrides)
layouts_dist=(
  "pp1:1:--pp 1"
  "pp2-1f1b:2:--pp 2 --schedule 1f1b"
  "pp2-gpipe:2:--pp 2 --schedule gpipe"
  "pp2-zbh1:2:--pp 2 --schedule zb-h1"
  "pp2v2-interleaved:2:--pp 2 --vpp 2 --schedule interleaved-1f1b"
  "pp2v2-zbv:2:--pp 2 --vpp 2 --schedule zbv"
  "pp2v2-dualpipev:2:--pp 2 --vpp 2 --schedule dualpipev"
  "dp2:2:--dp 2 --microbatches 2"
)
layouts_tiny=(
  "pp1v4:1:--pp 1 --vpp 4"
  "pp2v2-interleaved:2:--pp 2 --vpp 2 --schedule interleaved-1f1b"
  "pp2v2-zbv:2:--pp 2 --vpp 2 --schedule zbv"
  "pp2v2-dualpipev:2:--pp 2 --vpp 2 --schedule dualpipev"
)
echo "hypipe $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, $steps steps a run, 1 thread a rank"
for which in dist tiny; do
  spec=${!which}
  name="layouts_$which[@]"
  layouts=("${!name}")
  measure=${layouts[0]#*:*:}
  "$bin/hypipe" compile "$spec" $measure -o "$tmp/$which-costs" > /dev/null
  "$bin/hypipe-run" "$tmp/$which-costs" --steps "$steps" -q --threads 1 \
    --costs-out "$tmp/$which.costs.json" > /dev/null
  echo
  echo "model: $(basename "$spec" .yaml), costs measured on ${layouts[0]%%:*}"
  printf '%-20s %6s %16s %16s %8s %16s %8s\n' layout ranks "predicted tok/s" "measured tok/s" ratio \
    "with links" ratio
  : > "$tmp/$which.rows"
  for entry in "${layouts[@]}"; do
    lname=${entry%%:*} rest=${entry#*:} ranks=${rest%%:*} over=${rest#*:}
    predicted=$("$bin/hypipe" explain "$spec" $over --costs "$tmp/$which.costs.json" --json |
      /usr/bin/python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["simulation"]["predicted_tokens_per_s"])')
    linked=$("$bin/hypipe" explain "$spec" $over --costs "$tmp/$which.costs.json" --device cpu --json |
      /usr/bin/python3 -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["simulation"]["predicted_tokens_per_s"])')
    "$bin/hypipe" compile "$spec" $over -o "$tmp/$which-$lname" > /dev/null
    if [[ $ranks == 1 ]]; then
      "$bin/hypipe-run" "$tmp/$which-$lname" --steps "$steps" -q --threads 1 --json-log "$tmp/$which-$lname.jsonl" > /dev/null
    else
      "${mpirun[@]}" -np "$ranks" "$bin/hypipe-run" "$tmp/$which-$lname" --steps "$steps" -q --threads 1 \
        --json-log "$tmp/$which-$lname.jsonl" > /dev/null
    fi
    measured=$(/usr/bin/python3 -c 'import json,statistics,sys; r=[json.loads(l) for l in open(sys.argv[1])][1:]; print("%.0f" % statistics.median(x["tokens_per_s"] for x in r))' "$tmp/$which-$lname.jsonl")
    printf '%-20s %6s %16s %16s %7.2fx %16s %7.2fx\n' "$lname" "$ranks" "$predicted" "$measured" \
      "$(awk -v p="$predicted" -v m="$measured" 'BEGIN { print p / m }')" "$linked" \
      "$(awk -v p="$linked" -v m="$measured" 'BEGIN { print p / m }')"
    echo "$lname $ranks $predicted $measured" >> "$tmp/$which.rows"
  done
  /usr/bin/python3 - "$tmp/$which.rows" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
ranks = {n: k for n, k, _, _ in rows}
rows = [(n, float(p), float(m)) for n, _, p, m in rows]
worst = max(abs(p / m - 1) for _, p, m in rows)
bad = []
for i, a in enumerate(rows):
    for b in rows[i + 1:]:
        if abs(a[2] - b[2]) <= 0.05 * max(a[2], b[2]):
            continue  # measured within 5%: either order
        if (a[1] > b[1]) != (a[2] > b[2]):
            bad.append("%s/%s" % (a[0], b[0]))
print("worst |predicted/measured - 1|: %.1f%%; order %s" % (
    100 * worst, "as measured" if not bad else "differs for " + ", ".join(bad)))
# The choice: the layout predicted fastest among those of the most ranks
# (what plan would pick for that rank count), measured against the fastest
# measured of them.
most = max(int(n) for n in ranks.values())
pool = [r for r in rows if int(ranks[r[0]]) == most]
pick = max(pool, key=lambda r: r[1])
best = max(pool, key=lambda r: r[2])
print("choice on %d ranks: predicted best %s measures %.1f%% of the fastest measured (%s)" % (
    most, pick[0], 100 * pick[2] / best[2], best[0]))
PY
done
