#!/usr/bin/env bash
# One G layer's CPU time (after scripts/build.sh): bench-gdn (hypipe's
# recipes/Gdn.h on the CPU kernels: forward, input and weight gradients of
# one microbatch) against PyTorch (bench/fast_gdn.py: transformers'
# Qwen3NextGatedDeltaNet, its chunked torch_chunk_gated_delta_rule, with the
# pre-norm and residual; autograd backward) at each size and thread count,
# the least of `reps` runs of each. COMPILE=1 adds the PyTorch layer through
# torch.compile (about a minute of compiling per row on 2 cores).
# Both use the OpenBLAS core hypipe-run picks (bench-sgemm --core).
# Usage: bench/run_gdn.sh [reps] [threads...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/bin}
python=${PYTHON:-/root/.cache/hypipe/venv/bin/python}
reps=${1:-5}
shift || true
threads=("${@:-1 2}")
read -r -a threads <<< "${threads[*]}"
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$("$bin/bench-sgemm" --core)}
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-4}
echo "OpenBLAS core: $OPENBLAS_CORETYPE; least of $reps runs; ms of one microbatch"
# hidden key_heads value_heads key_dim value_dim batch seq
sizes=("256 2 4 64 64 2 512" "512 4 8 64 64 1 2048" "1024 4 8 128 128 1 2048")
columns=("size (h nk nv dk dv b s)" thr "hyp fwd" "hyp bwd" "pt fwd" "pt bwd" "pt/hyp")
head='%-30s %4s %9s %9s %9s %9s %7s'
if [[ ${COMPILE:-0} == 1 ]]; then
  head+=' %11s %11s %7s'
  columns+=("ptc fwd" "ptc bwd" "ptc/hyp")
fi
printf "$head\n" "${columns[@]}"
for size in "${sizes[@]}"; do
  for t in "${threads[@]}"; do
    read -r hf hb <<< "$("$bin/bench-gdn" "$t" "$reps" $size)"
    read -r pf pb <<< "$(OMP_NUM_THREADS=$t "$python" "$root/bench/fast_gdn.py" "$t" "$reps" $size 2> /dev/null)"
    row=$(printf '%-30s %4s %9.2f %9.2f %9.2f %9.2f %6.2fx' "$size" "$t" "$hf" "$hb" "$pf" "$pb" \
      "$(/usr/bin/python3 -c "print(($pf + $pb) / ($hf + $hb))")")
    if [[ ${COMPILE:-0} == 1 ]]; then
      read -r cf cb <<< "$(OMP_NUM_THREADS=$t "$python" "$root/bench/fast_gdn.py" "$t" "$reps" $size --compile 2> /dev/null)"
      row+=$(printf ' %11.2f %11.2f %6.2fx' "$cf" "$cb" \
        "$(/usr/bin/python3 -c "print(($cf + $cb) / ($hf + $hb))")")
    fi
    echo "$row"
  done
done
