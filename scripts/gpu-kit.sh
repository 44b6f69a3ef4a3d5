#!/usr/bin/env bash
# The GPU kit: everything a GPU session needs, built here (CPU machine, with
# MLIR, OpenBLAS and Open MPI), carried to a GPU node that has none of them,
# and run there in one call (docs/cuda.md, "The GPU kit").
#
#   scripts/gpu-kit.sh build DIR [BUILD_DIR]   fill DIR (under 48 MiB)
#   DIR/run.sh OUT --deadline 420              on the node: the default plan
#                                              (or the plans, suites and
#                                              SUITE:CHECKs named); OUT holds
#                                              results.{json,md}, work.tar.gz
#
# DIR holds:
#   bundle/    hypipe-run and the libraries a node lacks (scripts/bundle.sh;
#              OpenBLAS as .xz, unpacked by bundle/env.sh under $TMPDIR,
#              never into the kit)
#   mpi/       Open MPI relocated: mpirun, its libraries, MCA components and
#              PMIx, found through OPAL_PREFIX (mpi/env.sh sets it up)
#   art/       cuda artifacts: the reference specs, the bundled example, the
#              packed example, the GPU benchmark model; cpu artifacts of the
#              bundled example for the checkpoint check
#   cpu/       the cpu target's one-step dumps of the reference specs
#   kernels/   the CUDA kernel sources and rebuild.sh (nvcc only): fix a kernel
#              on the node, rebuild bundle/lib's library, run again
#   probes/    probe and baseline programs (built here, sources beside them)
#   py/        the Python checks and peers, with what they import
#   data/      the example data the artifacts read
#   run.sh, run.py, MANIFEST (every file with its size)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  echo "usage: scripts/gpu-kit.sh build DIR [BUILD_DIR]" >&2
  exit 2
}
[[ ${1:-} == build ]] || usage
kit=${2:-}
[[ -n $kit ]] || usage
build=$(cd "${3:-$root/build}" && pwd)
hypipe="$build/bin/hypipe"
run="$build/bin/hypipe-run"
for f in "$hypipe" "$run" "$build/lib/libhypipe_kernels_cuda.so" \
  "$build/bin/hypipe-transport-tests"; do
  [[ -e $f ]] || {
    echo "error: $f is missing: build hypipe with the CUDA target first" \
      "(scripts/build.sh on a machine with /usr/local/cuda)" >&2
    exit 1
  }
done
[[ ! -e $kit || -z "$(ls -A "$kit")" ]] || {
  echo "error: $kit is not empty; give a new or empty directory" >&2
  exit 1
}
mkdir -p "$kit"
kit=$(cd "$kit" && pwd)
step() { echo "gpu-kit: $*"; }

step "bundle"
"$root/scripts/bundle.sh" "$kit/bundle" "$build" > /dev/null
# The transport conformance suite beside hypipe-run, with the same wrapper.
cp "$build/bin/hypipe-transport-tests" "$kit/bundle/libexec/"
sed 's|libexec/hypipe-run|libexec/hypipe-transport-tests|' "$kit/bundle/bin/hypipe-run" \
  > "$kit/bundle/bin/hypipe-transport-tests"
chmod +x "$kit/bundle/bin/hypipe-transport-tests"
# OpenBLAS (every core type: 36 MB) travels compressed; bundle/env.sh
# unpacks it outside the kit on first use.
xz -T2 -6 "$kit/bundle/lib/libopenblas.so.0"

step "Open MPI, relocated"
"$root/scripts/gpu-kit/relocate-mpi.sh" "$kit/mpi"

step "artifacts and the cpu target's reference dumps"
mkdir -p "$kit/art" "$kit/cpu" "$kit/data"
cp "$root/examples/data/licenses.txt" "$kit/data/"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compile() { "$hypipe" compile "$@" > "$tmp/compile.log" || {
  cat "$tmp/compile.log" >&2
  exit 1
}; }
for s in all-kinds untied-rope gelu mtp gdn mla dsa; do
  spec="$root/test/e2e/Inputs/ref-$s.yaml"
  compile "$spec" --target cuda -o "$kit/art/$s"
  compile "$spec" -o "$tmp/cpu-$s"
  "$run" "$tmp/cpu-$s" --steps 1 --dump-step "$kit/cpu/$s.safetensors" -q \
    --data "$kit/data/licenses.txt" > /dev/null
  # bf16 (docs/precision.md): the CPU emulation is what the GPU must agree with.
  compile "$spec" --target cuda --dtype bf16 -o "$kit/art/$s-bf16"
  compile "$spec" --dtype bf16 -o "$tmp/cpu-$s-bf16"
  "$run" "$tmp/cpu-$s-bf16" --steps 1 --dump-step "$kit/cpu/$s-bf16.safetensors" -q \
    --data "$kit/data/licenses.txt" > /dev/null
done
# The linear cross-entropy (docs/precision.md): the MTP spec's head and depth
# losses a chunk of 7 tokens at a time, the logits made again by I and W.
linear=(--cross-entropy-fusion-impl linear --cross-entropy-chunk-tokens 7)
spec="$root/test/e2e/Inputs/ref-mtp.yaml"
compile "$spec" "${linear[@]}" --target cuda -o "$kit/art/mtp-linear"
compile "$spec" "${linear[@]}" -o "$tmp/cpu-mtp-linear"
"$run" "$tmp/cpu-mtp-linear" --steps 1 --dump-step "$kit/cpu/mtp-linear.safetensors" -q \
  --data "$kit/data/licenses.txt" > /dev/null
# Activation recompute (issue 48): the same spec with full and selective
# recompute, whose gradients must be those of art/all-kinds bit for bit.
spec="$root/test/e2e/Inputs/ref-all-kinds.yaml"
compile "$spec" --target cuda --recompute-granularity full --recompute-method uniform \
  --recompute-num-layers 1 -o "$kit/art/all-kinds-rc-full"
compile "$spec" --target cuda --recompute-granularity selective --recompute-modules \
  core_attn layernorm mlp moe_act -- -o "$kit/art/all-kinds-rc-selective"
# bf16 saved tensors packed in two bytes (docs/precision.md, "bf16 storage"):
# GPipe keeps three microbatches in flight, so the packed copies are made.
compile "$spec" --target cuda --dtype bf16 --schedule gpipe --microbatches 3 \
  -o "$kit/art/all-kinds-bf16-gpipe"
compile "$spec" --dtype bf16 --schedule gpipe --microbatches 3 -o "$tmp/all-kinds-bf16-gpipe"
"$run" "$tmp/all-kinds-bf16-gpipe" --steps 1 -q --data "$kit/data/licenses.txt" \
  --dump-step "$kit/cpu/all-kinds-bf16-gpipe.safetensors" > /dev/null
compile "$root/examples/hybrid-tiny.yaml" --pp 1 --vpp 4 --target cuda -o "$kit/art/tiny"
compile "$root/examples/hybrid-tiny.yaml" --pp 1 --vpp 4 --target cpu -o "$kit/art/tiny-cpu"
compile "$root/examples/packed-sft.yaml" --pp 1 --vpp 4 --target cuda -o "$kit/art/packed"
compile "$root/examples/packed-sft.yaml" --pp 1 --vpp 4 --target cpu -o "$tmp/packed-cpu"
# cuDNN's fused attention (issue 54) on ragged microbatches: the packed
# example in bf16, against the cpu target's bf16 losses.
compile "$root/examples/packed-sft.yaml" --pp 1 --vpp 4 --target cuda --dtype bf16 \
  -o "$kit/art/packed-bf16"
compile "$root/examples/packed-sft.yaml" --pp 1 --vpp 4 --target cpu --dtype bf16 \
  -o "$tmp/packed-cpu-bf16"
compile "$root/examples/hybrid-tiny.yaml" --pp 1 --vpp 4 --target cuda --dtype bf16 -o "$kit/art/tiny-bf16"
compile "$root/examples/hybrid-tiny.yaml" --pp 1 --vpp 4 --target cpu --dtype bf16 -o "$tmp/tiny-cpu-bf16"
compile "$root/bench/specs/gpu-bench.yaml" --target cuda -o "$kit/art/gpu-bench"
compile "$root/bench/specs/gpu-bench.yaml" --target cuda --dtype bf16 -o "$kit/art/gpu-bench-bf16"
"$hypipe" explain "$root/bench/specs/gpu-bench.yaml" --json > "$kit/art/gpu-bench.explain.json"
python3 "$root/bench/specs/gpu_bench_size.py" "$root/bench/specs/gpu-bench.yaml" \
  > "$kit/art/gpu-bench.size"
# The cpu target's losses the GPU runs are held to: the bundled example's 200
# steps, the packed example's 30, and 20 steps with the learning rate of the
# checkpoint check (10 on the GPU, resumed on the CPU for 10 more).
cpu_losses() { "$run" "$1" -q --json-log "$kit/cpu/$2.jsonl" "${@:3}" > /dev/null; }
cpu_losses "$kit/art/tiny-cpu" tiny --steps 200 --data "$kit/data/licenses.txt"
cpu_losses "$kit/art/tiny-cpu" tiny-20 --steps 20 --lr-decay-steps 20 --data "$kit/data/licenses.txt"
cpu_losses "$tmp/packed-cpu" packed --steps 30
cpu_losses "$tmp/packed-cpu-bf16" packed-bf16 --steps 30
cpu_losses "$tmp/tiny-cpu-bf16" tiny-bf16 --steps 200 --data "$kit/data/licenses.txt"
# Several ranks on the one GPU (the transports suite): pp 2 x vpp 2 x dp 2
# with the distributed optimizer, four ranks over mpi-staged, held to the
# cpu target's run of the same layout here, in fp32 and bf16.
for dtype in fp32 bf16; do
  compile "$root/examples/hybrid-tiny.yaml" --dp 2 --distributed-optimizer --target cuda \
    --dtype $dtype -o "$kit/art/tiny-p2d2-$dtype"
  compile "$root/examples/hybrid-tiny.yaml" --dp 2 --distributed-optimizer --target cpu \
    --dtype $dtype -o "$tmp/tiny-p2d2-cpu-$dtype"
  mpirun --allow-run-as-root --oversubscribe -np 4 "$run" "$tmp/tiny-p2d2-cpu-$dtype" -q \
    --steps 20 --json-log "$kit/cpu/tiny-p2d2-$dtype.jsonl" --data "$kit/data/licenses.txt" > /dev/null
done
# Tensor parallelism (issue 49): tp 2 with sequence parallelism on the cuda
# target, held to the cpu target's tp 1 run of the same spec (the same
# losses at every tp: docs/tensor-parallel.md): every layer kind that splits
# (M, *, -, E with its tp-split experts) and an MTP depth holding a MoE
# layer (its vocabulary-parallel lookup and column-parallel eh_proj).
sed "s|pattern: \"ME\\*E-ME\\*\"|pattern: \"ME*E-ME*/*E\"|; s|\.\./\.\./\.\./examples|$root/examples|" \
  "$root/test/e2e/Inputs/tp-moe.yaml" > "$tmp/tp-mtp.yaml"
grep -q '/\*E"' "$tmp/tp-mtp.yaml" || { echo "gpu-kit.sh: no MTP depth in tp-mtp.yaml" >&2; exit 1; }
compile "$tmp/tp-mtp.yaml" --tp 2 --sequence-parallel --target cuda -o "$kit/art/tp2-sp"
# Expert parallelism inside the tp group (issue 50): tp 2 x ep 2, etp 1.
compile "$tmp/tp-mtp.yaml" --tp 2 --sequence-parallel --ep 2 --etp 1 --target cuda \
  -o "$kit/art/tp2-ep2"
# The alltoall dispatcher on the same grid, in a model whose attention is
# multi-latent ('+' split by heads: its replicated latents and the sums of
# their gradients), against the cpu target's tp 1 run of that model.
sed 's|pattern: "ME\*E-ME\*/\*E"|pattern: "ME+E-ME+/+E"|; s|^  num_query_groups: 4|  num_query_groups: 4\n  q_lora_rank: 16\n  kv_lora_rank: 16\n  qk_head_dim: 16\n  qk_pos_emb_head_dim: 8\n  v_head_dim: 16\n  qk_layernorm: true|' \
  "$tmp/tp-mtp.yaml" > "$tmp/tp-mla.yaml"
grep -q 'ME+E-ME+/+E' "$tmp/tp-mla.yaml" || { echo "gpu-kit.sh: no '+' in tp-mla.yaml" >&2; exit 1; }
# Tokens dropped at capacity factor 1 (counted per sequence shard, so the
# reference is the cpu target's run of the same layout).
a2a=(--tp 2 --sequence-parallel --ep 2 --etp 1 --moe-token-dispatcher-type alltoall
     --moe-expert-capacity-factor 1)
compile "$tmp/tp-mla.yaml" "${a2a[@]}" --target cuda -o "$kit/art/tp2-ep2-a2a"
# The alltoall dispatcher alone (plan all), to tell its failure from MLA's.
compile "$tmp/tp-mtp.yaml" --tp 2 --sequence-parallel --ep 2 --etp 1 \
  --moe-token-dispatcher-type alltoall --target cuda -o "$kit/art/tp2-ep2-a2a-moe"
compile "$tmp/tp-mla.yaml" "${a2a[@]}" --target cpu -o "$tmp/tp-mla-cpu"
compile "$tmp/tp-mtp.yaml" --target cpu -o "$tmp/tp-cpu"
"$run" "$tmp/tp-cpu" -q --steps 20 --json-log "$kit/cpu/tp.jsonl" \
  --data "$kit/data/licenses.txt" > /dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 "$run" "$tmp/tp-mla-cpu" -q --steps 20 \
  --json-log "$kit/cpu/tp-mla.jsonl" --data "$kit/data/licenses.txt" > /dev/null
# Expert parallelism over data-parallel replicas (issue 50): dp 2 x ep 2,
# each replica's routing statistics its own (the CUDA router's per-replica
# counts and aux loss), the experts' gradients over the expert-data-parallel
# group, against the cpu target's run of the same layout.
compile "$tmp/tp-mtp.yaml" --dp 2 --microbatches 2 --ep 2 --etp 1 --target cuda \
  -o "$kit/art/dp2-ep2"
compile "$tmp/tp-mtp.yaml" --dp 2 --microbatches 2 --ep 2 --etp 1 --target cpu \
  -o "$tmp/dp2-ep2-cpu"
mpirun --allow-run-as-root --oversubscribe -np 2 "$run" "$tmp/dp2-ep2-cpu" -q --steps 20 \
  --json-log "$kit/cpu/dp2-ep2.jsonl" --data "$kit/data/licenses.txt" > /dev/null
# The same grid with the distributed optimizer: the experts' moments over the
# expert-data-parallel group, the dense floats' sums and gathers over the
# replicas chunk by chunk through a device scratch (against the same cpu run).
compile "$tmp/tp-mtp.yaml" --dp 2 --microbatches 2 --ep 2 --etp 1 --distributed-optimizer \
  --target cuda -o "$kit/art/dp2-ep2-dist"
# The same grid on packed mock samples: each replica's microbatch padded to
# the group's most rows, the CUDA router leaving the padding rows out of its
# counts, dispatch and load-balancing loss (MoeShape::realTokens).
{ sed -e '/^data:/,$d' -e 's|micro_batch_size: 2|micro_batch_size: 1|' "$tmp/tp-mtp.yaml"
  cat <<'YAML'
data:
  format: mock
  mock: '{"mode": "distribution", "type": "lognormal", "min_seq_len": 4, "max_seq_len": 60, "mean_seq_len": 24, "lognormal_sigma": 0.8}'
  packing: true
  max_tokens_per_microbatch: 64
  global_batch_size: 8
  bin_count_multiple: 2
YAML
} > "$tmp/tp-packed.yaml"
compile "$tmp/tp-packed.yaml" --dp 2 --ep 2 --etp 1 --target cuda -o "$kit/art/dp2-ep2-packed"
compile "$tmp/tp-packed.yaml" --dp 2 --ep 2 --etp 1 --target cpu -o "$tmp/dp2-ep2-packed-cpu"
mpirun --allow-run-as-root --oversubscribe -np 2 "$run" "$tmp/dp2-ep2-packed-cpu" -q --steps 20 \
  --json-log "$kit/cpu/dp2-ep2-packed.jsonl" > /dev/null
# DeepSeek sparse attention over tp 2 (issue 52): MLA's heads split, the
# indexer whole on each rank, the KL target's parts summed over the group
# (its CUDA kernels' row range and target difference), against the cpu
# target's tp 1 run (the vocabulary padded alike at both).
compile "$root/test/e2e/Inputs/ref-dsa.yaml" --make-vocab-size-divisible-by 64 --tp 2 \
  --sequence-parallel --microbatches 4 --target cuda -o "$kit/art/tp2-dsa"
compile "$root/test/e2e/Inputs/ref-dsa.yaml" --make-vocab-size-divisible-by 64 \
  --microbatches 4 --target cpu -o "$tmp/dsa-tp-cpu"
"$run" "$tmp/dsa-tp-cpu" -q --steps 20 --json-log "$kit/cpu/dsa-tp.jsonl" \
  --data "$kit/data/licenses.txt" > /dev/null
# Gated DeltaNet over tp 2: each rank half the key and value heads, the out
# norm's gradient summed over the two, against the cpu target's tp 1 run.
compile "$root/test/e2e/Inputs/ref-gdn.yaml" --tp 2 --sequence-parallel --microbatches 4 \
  --target cuda -o "$kit/art/tp2-gdn"
compile "$root/test/e2e/Inputs/ref-gdn.yaml" --microbatches 4 --target cpu -o "$tmp/gdn-tp-cpu"
"$run" "$tmp/gdn-tp-cpu" -q --steps 20 --json-log "$kit/cpu/gdn-tp.jsonl" \
  --data "$kit/data/licenses.txt" > /dev/null
# The all-reduce overlapped with the last backward, bucket by bucket
# (without the distributed optimizer, 10 KiB buckets): the same layout.
compile "$root/examples/hybrid-tiny.yaml" --dp 2 --target cuda -o "$kit/art/tiny-p2d2-buckets"
compile "$root/examples/hybrid-tiny.yaml" --dp 2 --target cpu -o "$tmp/tiny-p2d2-cpu-buckets"
mpirun --allow-run-as-root --oversubscribe -np 4 "$run" "$tmp/tiny-p2d2-cpu-buckets" -q \
  --steps 20 --grad-bucket-mib 0.01 --json-log "$kit/cpu/tiny-p2d2-buckets.jsonl" \
  --data "$kit/data/licenses.txt" > /dev/null

step "CUDA kernel sources"
"$root/scripts/gpu-kit/copy-kernel-sources.sh" "$root" "$kit/kernels"

step "probes"
"$root/scripts/gpu-kit/probes/build.sh" "$kit/probes" > "$tmp/probes.log" 2>&1 || {
  cat "$tmp/probes.log" >&2
  exit 1
}
cp "$root"/scripts/gpu-kit/probes/*.cu "$root"/scripts/gpu-kit/probes/*.cpp \
  "$root"/scripts/gpu-kit/probes/*.py "$root"/scripts/gpu-kit/probes/build.sh "$kit/probes/"

step "Python checks and peers"
mkdir -p "$kit/py"
cp "$root/test/reference/torch_reference.py" "$root/test/e2e/compare_dumps.py" \
  "$root/bench/fast_mamba.py" "$root/bench/fast_moe.py" "$root/bench/peer_train.py" \
  "$root/bench/gpu/sdpa_bench.py" "$root/bench/gpu/peer_train_gpu.py" "$root/bench/gpu/kit_main.py" \
  "$root/scripts/gpu-kit/losses.py" "$kit/py/"
cp "$root/scripts/gpu-kit/run.sh" "$root/scripts/gpu-kit/run.py" "$kit/"
commit=$(git -C "$root" rev-parse --short HEAD 2> /dev/null || echo unknown)
git -C "$root" diff --quiet HEAD 2> /dev/null || commit="$commit+changes"
printf '{"commit": "%s", "built": "%s", "host": "%s"}\n' "$commit" \
  "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(hostname)" > "$kit/KIT.json"

(cd "$kit" && find . -type f -printf '%s %p\n' | sort -k2 > MANIFEST)
size=$(du -sb "$kit" | cut -f1)
step "$(numfmt --to=iec "$size") in $kit"
if ((size > 48 * 1024 * 1024)); then
  echo "error: the kit is over 48 MiB (a GPU call carries 64 MiB in all, the" \
    "repository's files with it)" >&2
  exit 1
fi
