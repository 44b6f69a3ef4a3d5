# Shared by bench/run_tensor_parallel.sh and bench/run_expert_parallel.sh
# (source it): `layout_table SPEC STEPS "name|ranks|flags" ...` trains SPEC
# for STEPS steps in each layout and prints a row per layout: tokens/s (the
# mean over the steps after the first), its ratio to the first layout, the
# peak tensor MiB of rank 0 as its device measured it, the last loss, and
# the measured step beside the one `hypipe explain --device cpu` predicts
# (the cost model's FLOPs and the layout's collectives on the cpu device's
# link).
layout_table() {
  local root spec steps work base entry name rest ranks dir predicted row
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  spec=$1 steps=$2
  shift 2
  work=$(mktemp -d)
  base=""
  printf '%-14s %6s %10s %8s %11s %10s %12s %12s\n' layout ranks "tok/s" "vs first" "tensor MiB" "last loss" "step meas." "step pred."
  for entry in "$@"; do
    name=${entry%%|*}
    rest=${entry#*|}
    ranks=${rest%%|*}
    local -a flags
    read -r -a flags <<< "${rest#*|}"
    dir="$work/run-${name//[^a-z0-9]/}"
    "$root/build/bin/hypipe" train "$spec" "${flags[@]}" --steps "$steps" --no-save \
      --run-dir "$dir" > "$dir.out" 2>&1 || { cat "$dir.out"; return 1; }
    predicted=$("$root/build/bin/hypipe" explain "$spec" "${flags[@]}" --device cpu --json |
      /usr/bin/python3 -c "import json, sys; print(json.load(sys.stdin)['simulation']['predicted_step_s'])")
    /usr/bin/python3 - "$dir" "$name" "${base:-0}" "$predicted" "$ranks" <<'PY' > "$dir.row"
import glob, json, os, sys
d, name, base, predicted = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
s = json.load(open(os.path.join(d, "summary.json")))
log = [json.loads(l) for l in open(glob.glob(os.path.join(d, "*.jsonl"))[0])]
later = log[1:] or log
rate = sum(r["tokens_per_s"] for r in later) / len(later)
step = sum(r["tokens"] / r["tokens_per_s"] for r in later) / len(later)
mem = s["memory_mib"][0]["tensors"]
ranks = int(sys.argv[5])
ratio = rate / base if base > 0 else 1.0
print("%-14s %6d %10.0f %7.2fx %11.1f %10.4f %11.4fs %11.4fs %.3f"
      % (name, ranks, rate, ratio, mem, log[-1]["loss"], step, predicted, rate))
PY
    row=$(cat "$dir.row")
    printf '%s\n' "${row% *}"
    [[ -n $base ]] || base=${row##* }
  done
  rm -rf "$work"
}
