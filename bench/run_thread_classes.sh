#!/usr/bin/env bash
# Does every kernel class run faster on more threads? (after scripts/build.sh)
# hypipe-run --profile on one spec at each thread count, each run `reps`
# times; per class the least time over the runs (a shared machine's noise
# only adds), and its ratio to the first thread count's.
# Usage: bench/run_thread_classes.sh [steps] [reps] [threads...]
#        (SPEC: bench/specs/train-issue.yaml unless set)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-16}
reps=${2:-3}
shift 2 || true
threads=("${@:-1 2}")
read -r -a threads <<< "${threads[*]}"
spec=${SPEC:-$root/bench/specs/train-issue.yaml}
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$root/build/bin/bench-sgemm" --core)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$root/build/bin/hypipe" compile "$spec" -o "$tmp/art" > /dev/null
for t in "${threads[@]}"; do
  for ((r = 0; r < reps; ++r)); do
    OMP_NUM_THREADS=$t "$root/build/bin/hypipe-run" "$tmp/art" --steps "$steps" \
      --threads "$t" --profile -q |
      awk -v t="$t" '/^profile /{on=1; next} on { n=split($0, f, /  +/); if (n >= 3) print t "\t" f[1] "\t" f[2] }'
  done
done | /usr/bin/python3 -c '
import sys
best = {}
order = []
for line in sys.stdin:
    t, cls, sec = line.rstrip("\n").split("\t")
    sec = float(sec.rstrip("s"))
    if cls not in order:
        order.append(cls)
    key = (int(t), cls)
    best[key] = min(best.get(key, sec), sec)
ts = sorted({t for t, _ in best})
print("%-18s" % "class" + "".join("%12s" % ("%d thr (s)" % t) for t in ts) +
      "".join("%10s" % ("x%d/x%d" % (ts[0], t)) for t in ts[1:]))
for cls in order:
    row = "%-18s" % cls + "".join("%12.4f" % best[(t, cls)] for t in ts)
    row += "".join("%9.2fx" % (best[(ts[0], cls)] / best[(t, cls)])
                   for t in ts[1:])
    print(row)
'
echo "($spec, $steps steps per run, least of $reps runs per thread count)"
