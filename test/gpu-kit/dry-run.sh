#!/bin/bash
# ctest's gpu-kit-dry-run: builds the GPU kit from this build, checks its
# size (under 48 MiB, before and after its runs) and that every file a check
# reads is in it, runs the default plan as on a machine without a GPU (every
# check present and skipped, at most 8 files in OUT, the plan's limits at
# most 420 s), runs the driver on a stand-in GPU (figures, failures,
# --failed-in, the deadline, SIGTERM), shows that a missing input fails its
# check, runs two CPU ranks through the kit's own Open MPI with this
# machine's hidden, and rebuilds the CUDA kernel library from the kit's
# sources alone.
# Usage: test/gpu-kit/dry-run.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: dry-run.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kit="$work/kit"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$root/scripts/gpu-kit.sh" build "$kit" "$build"
kit_size() { du -sb "$kit" | cut -f1; }
limit=$((48 * 1024 * 1024))
(($(kit_size) < limit)) || fail "the kit is $(kit_size) bytes, over 48 MiB"
echo "kit: $(kit_size) bytes"

# As on a node without a GPU: the default plan's every check reports,
# skipped; OUT holds at most 8 files; the plan's limits add up to 420 s at
# most (docs/cuda.md: what a first call on a GPU may take).
CUDA_VISIBLE_DEVICES= "$kit/run.sh" "$work/out" > "$work/run.log" || {
  cat "$work/run.log"
  fail "run.sh failed on a complete kit"
}
python3 "$root/test/gpu-kit/check_results.py" "$work/out" skipped
python3 - "$work/out/results.json" << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))
limits = sum(c["limit_s"] for c in r["checks"])
assert limits <= 420, f"the default plan's limits add up to {limits} s, over 420"
names = [c["suite"] + ":" + c["name"] for c in r["checks"]]
assert names[:2] == ["environment:device", "environment:libraries"], names[:2]
assert names[-1] == "transports:tp2-ep2-staged", names[-1]
assert "correctness:ref-gdn" in names and "bf16:bf16-gdn" in names, names
# cuDNN's fused attention (issue 54) and the bench without it, side by side.
assert "bf16:fused-attention-packed" in names, names
assert names.index("bench:gpu-bench-bf16-native-attn") == \
    names.index("bench:gpu-bench-bf16") + 1, names
print(f"default plan: {len(names)} checks, limits {limits} s")
PY
grep -q "^| bench | skipped: no GPU" "$work/out/results.md" ||
  fail "results.md lacks the bench suite's row"

# Names a plan does not have are refused, saying what there is.
if "$kit/run.sh" "$work/bad" no-such-check 2> "$work/bad.err"; then
  fail "run.sh accepted an unknown check"
fi
grep -q "no plan, suite or check no-such-check" "$work/bad.err" || fail "$(cat "$work/bad.err")"

# The driver's own path on a "GPU" (a stand-in nvidia-smi): checks run, their
# figures are read, a failing one is recorded with its reason and the others
# go on; every binary of the kit resolves its libraries.
mkdir -p "$work/fake"
cat > "$work/fake/nvidia-smi" << 'SMI'
#!/bin/sh
# `nvidia-smi -q` hangs when SLOW_SMI is set (a check that overruns).
[ "$1" = -q ] && [ -n "${SLOW_SMI:-}" ] && sleep 60
echo "GPU 0: Stand-in H100 (UUID: GPU-0)"
SMI
chmod +x "$work/fake/nvidia-smi"
PATH="$work/fake:$PATH" "$kit/run.sh" "$work/out3" environment > "$work/run3.log" || true
python3 - "$work/out3/results.json" << 'PY'
import json, sys
checks = {c["name"]: c for c in json.load(open(sys.argv[1]))["checks"]}
lib = checks["libraries"]
assert lib["status"] == "passed", lib
assert set(lib["figures"]) == {"nccl_found", "cudnn_found"}, lib["figures"]
assert all(c["status"] in ("passed", "failed", "skipped") and "seconds" in c
           for c in checks.values()), checks
assert any(c["status"] == "failed" and c.get("reason") for c in checks.values()), checks
print("driver on a stand-in GPU: checks ran, figures read, failures recorded")
PY
# The bundle's library path takes NCCL and cuDNN from the Python environment
# of the python3 on the PATH (pip's nvidia-nccl and nvidia-cudnn packages).
site="$work/venv/lib/python3.99/site-packages/nvidia"
mkdir -p "$work/venv/bin" "$site/nccl/lib" "$site/cudnn/lib"
ln -s "$(command -v python3)" "$work/venv/bin/python3"
path=$(PATH="$work/venv/bin:$PATH" sh -c 'here="$0"; . "$here/env.sh" && printf %s "$LD_LIBRARY_PATH"' \
  "$kit/bundle")
[[ $path == *"$site/nccl/lib"* && $path == *"$site/cudnn/lib"* ]] ||
  fail "bundle/env.sh's library path lacks the Python environment's NCCL or cuDNN: $path"
# A binary whose library is nowhere on the node: the libraries check names it.
mkdir -p "$work/fakelib"
echo 'int nothere(void) { return 0; }' | gcc -shared -fPIC -x c - -o "$work/fakelib/libnothere.so"
echo 'int nothere(void); int main(void) { return nothere(); }' |
  gcc -x c - -o "$kit/probes/needs_nothere" -L"$work/fakelib" -lnothere
if python3 "$kit/run.py" --check-libraries > "$work/ldd.log"; then
  fail "the libraries check passed with a library missing"
fi
grep -q "MISSING probes/needs_nothere: libnothere.so => not found" "$work/ldd.log" ||
  fail "the libraries check did not name the missing library: $(cat "$work/ldd.log")"
rm "$kit/probes/needs_nothere"
# --failed-in: only what failed before, in its order.
CUDA_VISIBLE_DEVICES= "$kit/run.sh" "$work/out4" --failed-in "$work/out3/results.json" \
  > /dev/null || true
python3 - "$work/out3/results.json" "$work/out4/results.json" << 'PY'
import json, sys
before = [c["name"] for c in json.load(open(sys.argv[1]))["checks"] if c["status"] == "failed"]
again = [c["name"] for c in json.load(open(sys.argv[2]))["checks"]]
assert before and again == before, (before, again)
print("--failed-in reruns", again)
PY

# The deadline: a check that overruns is cut at it, no check starts after
# it, and the results and the archive are there.
SLOW_SMI=1 PATH="$work/fake:$PATH" "$kit/run.sh" "$work/out5" --deadline 3 \
  environment:device environment:libraries > "$work/run5.log" || true
python3 - "$work/out5/results.json" << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))
device, libraries = r["checks"]
assert device["status"] == "failed" and "timed out after" in device["reason"], device
assert libraries["status"] == "not started" and "deadline" in libraries["reason"], libraries
assert r["seconds"] < 10, r["seconds"]
print("deadline: the overrunning check cut at it, the next not started")
PY
tar -tzf "$work/out5/work.tar.gz" | grep -q "logs/environment-device.log" ||
  fail "the archive lacks the cut check's log"
# SIGTERM (a call's time limit): the running check is stopped, the rest do
# not start, and OUT holds the results and the archive.
SLOW_SMI=1 PATH="$work/fake:$PATH" python3 "$kit/run.py" "$work/out6" \
  environment:device environment:libraries > "$work/run6.log" &
for _ in $(seq 50); do
  grep -q '"running"' "$work/out6/results.json" 2> /dev/null && break
  sleep 0.2
done
kill -TERM $!
wait $! || true
python3 - "$work/out6/results.json" << 'PY'
import json, sys
device, libraries = json.load(open(sys.argv[1]))["checks"]
assert "SIGTERM" in device["reason"] and libraries["status"] == "not started", (device, libraries)
print("SIGTERM: results and archive kept")
PY
python3 "$root/test/gpu-kit/check_results.py" "$work/out6" failed environment

# A kit that lacks a file a check reads: that check fails and says which.
rm "$kit/art/gpu-bench/manifest.json"
if CUDA_VISIBLE_DEVICES= "$kit/run.sh" "$work/out2" bench > "$work/run2.log"; then
  fail "run.sh passed with art/gpu-bench/manifest.json missing"
fi
python3 "$root/test/gpu-kit/check_results.py" "$work/out2" \
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
# Nothing a run does grows the kit past what a GPU call carries.
(($(kit_size) < limit)) || fail "after its runs the kit is $(kit_size) bytes, over 48 MiB"
echo "kit after its runs: $(kit_size) bytes"
echo "gpu-kit dry run: passed"
