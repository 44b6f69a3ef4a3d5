#!/bin/bash
# ctest's gpu-kit-dry-run: builds the GPU kit from this build, checks its
# size and that every file a suite reads is in it, runs it as on a machine
# without a GPU (every suite present, each skipped, results.json well
# formed), shows that a missing input fails its suite, runs two CPU ranks
# through the kit's own Open MPI with this machine's hidden, and rebuilds the
# CUDA kernel library from the kit's sources alone.
# Usage: test/gpu-kit/dry-run.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: dry-run.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kit="$work/kit"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$root/scripts/gpu-kit.sh" build "$kit" "$build"
size=$(du -sb "$kit" | cut -f1)
((size < 64 * 1024 * 1024)) || fail "the kit is $size bytes, over 64 MiB"
echo "kit: $size bytes"

# As on a node without a GPU: every suite reports, each skipped.
CUDA_VISIBLE_DEVICES= "$kit/run.sh" "$work/out" > "$work/run.log" || {
  cat "$work/run.log"
  fail "run.sh failed on a complete kit"
}
python3 "$root/test/gpu-kit/check_results.py" "$work/out/results.json" skipped
grep -q "^| \*\*bench\*\* | | \*\*skipped\*\*: no GPU" "$work/out/results.md" ||
  fail "results.md lacks the bench suite's row"

# The driver's own path on a "GPU" (a stand-in nvidia-smi): checks run, their
# figures are read, a failing one is recorded with its reason and the others
# go on.
mkdir -p "$work/fake"
printf '#!/bin/sh\necho "GPU 0: Stand-in H100 (UUID: GPU-0)"\n' > "$work/fake/nvidia-smi"
chmod +x "$work/fake/nvidia-smi"
PATH="$work/fake:$PATH" "$kit/run.sh" "$work/out3" environment > "$work/run3.log" || true
python3 - "$work/out3/results.json" << 'PY'
import json, sys
suite = json.load(open(sys.argv[1]))["suites"][0]
checks = {c["name"]: c for c in suite["checks"]}
lib = checks["libraries"]
assert lib["status"] == "passed", lib
assert set(lib["figures"]) == {"nccl_found", "cudnn_found"}, lib["figures"]
assert all(c["status"] in ("passed", "failed", "skipped") and "seconds" in c
           for c in checks.values()), checks
assert any(c["status"] == "failed" and c.get("reason") for c in checks.values()), checks
print("driver on a stand-in GPU: checks ran, figures read, failures recorded")
PY

# A kit that lacks a file a suite reads: that suite fails and says which.
rm "$kit/art/gpu-bench/manifest.json"
if CUDA_VISIBLE_DEVICES= "$kit/run.sh" "$work/out2" bench > "$work/run2.log"; then
  fail "run.sh passed with art/gpu-bench/manifest.json missing"
fi
python3 "$root/test/gpu-kit/check_results.py" "$work/out2/results.json" \
  "failed:the kit lacks art/gpu-bench/manifest.json" bench

# Two ranks through the kit's Open MPI and the bundle's hypipe-run, with this
# machine's Open MPI hidden (a private mount namespace), give the losses of
# the one-process layout the kit holds.
"$build/bin/hypipe" compile "$root/examples/hybrid-tiny.yaml" -o "$work/tiny-pp2" > /dev/null
ranks="source '$kit/mpi/env.sh' && mpirun -np 2 --allow-run-as-root --oversubscribe \
  '$kit/bundle/bin/hypipe-run' '$work/tiny-pp2' --steps 3 -q \
  --json-log '$work/pp2.jsonl' --data '$kit/data/licenses.txt'"
if unshare -m true 2> /dev/null; then
  unshare -m "$root/test/gpu-kit/without-system-mpi.sh" bash -c "$ranks"
else
  echo "note: unshare unavailable, this machine's Open MPI stays visible"
  bash -c "$ranks"
fi
python3 "$kit/py/losses.py" "$kit/cpu/tiny.jsonl" "$work/pp2.jsonl" --rtol 1e-5

# The kernel library rebuilt on its own from the kit's sources exports what
# the built one does.
defined() { nm -D --defined-only "$1" | awk '{print $NF}' | sort; }
defined "$kit/bundle/lib/libhypipe_kernels_cuda.so" > "$work/before"
HYPIPE_JOBS=2 "$kit/kernels/rebuild.sh"
defined "$kit/bundle/lib/libhypipe_kernels_cuda.so" > "$work/after"
diff "$work/before" "$work/after" > /dev/null ||
  fail "the rebuilt kernel library exports other symbols"
echo "gpu-kit dry run: passed"
