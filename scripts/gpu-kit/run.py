#!/usr/bin/env python3
"""The GPU kit's driver: runs every suite of checks on a GPU node, each
check with its own time limit and every suite inside its own, and writes
OUT/results.json and OUT/results.md (suite, status, figures, seconds) with a
log per check under OUT/logs/. A check that fails, crashes or runs out of
time does not stop the others.

A check is a shell command run in the kit's directory. It passes with exit
0, is skipped with exit 77 (it says why), and fails otherwise; it reports
figures as lines `@figure NAME VALUE UNIT`. On a machine without a GPU no
check runs: each suite checks that the kit files it reads are there and is
marked "skipped: no GPU" (the dry run of ctest's gpu-kit-dry-run).

usage: run.sh OUT [SUITE...]   (docs/cuda.md, "The GPU kit")
"""
import datetime
import glob
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import time

KIT = os.path.dirname(os.path.abspath(__file__))
DATA = "data/licenses.txt"
RUN = "bundle/bin/hypipe-run"
PEAKS = {  # per device: dense bf16 and fp32 TFLOP/s, memory TB/s (datasheets)
    "H100": (989.0, 67.0, 3.35),
    "H200": (989.0, 67.0, 4.8),
}
# The GEMM shapes of the benchmark model (bench/specs/gpu-bench.yaml), one
# microbatch of 4096 tokens, MxNxK: Mamba in/out projections, MLP, attention
# QKV and output, the output layer.
BENCH_GEMMS = "4096x10304x2048 4096x2048x4096 4096x6144x2048 4096x2048x6144 " \
              "4096x4096x2048 4096x2048x2048 4096x131072x2048"


class Check:
    def __init__(self, name, command, timeout, needs=(), requires=()):
        self.name, self.command, self.timeout = name, command, timeout
        self.needs = list(needs)  # kit files the command reads
        self.requires = list(requires)  # libraries found by the environment suite


class Suite:
    def __init__(self, name, limit, checks, what):
        self.name, self.limit, self.checks, self.what = name, limit, checks, what


def ref_check(spec):
    return Check(
        "ref-" + spec,
        f"{RUN} art/{spec} --steps 1 --dump-step $OUT/{spec}.safetensors -q --data {DATA}"
        f" && python3 py/compare_dumps.py cpu/{spec}.safetensors $OUT/{spec}.safetensors 1e-4"
        f" && python3 py/torch_reference.py art/{spec} $OUT/{spec}.safetensors",
        60, [f"art/{spec}/manifest.json", f"cpu/{spec}.safetensors", RUN,
             "py/compare_dumps.py", "py/torch_reference.py"])


def bf16_check(spec, tol):
    """The CUDA bf16 step of a reference spec against the CPU's bf16
    emulation (docs/precision.md: the same rounding points, so the two
    differ only where a sum's order moves a value across a bf16 rounding
    midpoint) and against the float64 reference under the bf16 rules, with
    test/e2e/bf16.test's tolerance for the spec."""
    return Check(
        f"bf16-{spec}",
        f"{RUN} art/{spec}-bf16 --steps 1 --dump-step $OUT/{spec}-bf16.safetensors -q"
        f" --data {DATA} && python3 py/compare_dumps.py cpu/{spec}-bf16.safetensors"
        f" $OUT/{spec}-bf16.safetensors {tol} && python3 py/torch_reference.py"
        f" art/{spec}-bf16 $OUT/{spec}-bf16.safetensors --tol {tol}",
        60, [f"art/{spec}-bf16/manifest.json", f"cpu/{spec}-bf16.safetensors", RUN,
             "py/compare_dumps.py", "py/torch_reference.py"])


SUITES = [
    Suite("environment", 30, [
        Check("device", "nvidia-smi --query-gpu=name,memory.total,driver_version,"
              "compute_cap --format=csv,noheader && nvidia-smi -q | grep -i 'CUDA Version'"
              " && (nvcc --version | tail -2 || true)", 15),
        Check("libraries", "python3 run.py --find-libraries", 15, ["run.py"]),
        Check("compute-sanitizer", "compute-sanitizer --version | head -2 && "
              "compute-sanitizer --tool memcheck probes/cublas_gemm --smoke "
              "| grep 'ERROR SUMMARY: 0 errors'", 20, ["probes/cublas_gemm"]),
        Check("ncu", "ncu --version | tail -1 && ncu --clock-control none --metrics "
              "gpu__time_duration.sum probes/cublas_gemm --smoke > $OUT/ncu.txt 2>&1;"
              " grep gpu__time_duration $OUT/ncu.txt", 20, ["probes/cublas_gemm"]),
    ], "the GPU, driver, CUDA, the libraries a node offers, the tools"),
    Suite("correctness", 140, [
        ref_check("all-kinds"), ref_check("untied-rope"), ref_check("gelu"), ref_check("mtp"),
        Check("tiny-200", f"{RUN} art/tiny --steps 200 --json-log $OUT/tiny.jsonl -q"
              f" --data {DATA} && python3 py/losses.py cpu/tiny.jsonl $OUT/tiny.jsonl"
              " --first-rtol 1e-5 --rtol 2e-3", 60,
              ["art/tiny/manifest.json", "cpu/tiny.jsonl", "py/losses.py"]),
        Check("packed-30", f"{RUN} art/packed --steps 30 --json-log $OUT/packed.jsonl -q"
              " && python3 py/losses.py cpu/packed.jsonl $OUT/packed.jsonl"
              " --first-rtol 1e-5 --rtol 1e-3", 40,
              ["art/packed/manifest.json", "cpu/packed.jsonl"]),
        Check("checkpoint-gpu-to-cpu",
              f"{RUN} art/tiny --steps 10 --lr-decay-steps 20 --save $OUT/ckpt -q --data {DATA}"
              f" && {RUN} art/tiny-cpu --resume $OUT/ckpt --steps 20 --json-log"
              f" $OUT/resumed.jsonl -q --data {DATA} && python3 py/losses.py"
              " cpu/tiny-20.jsonl $OUT/resumed.jsonl --from-step 11 --rtol 1e-4", 40,
              ["art/tiny-cpu/manifest.json", "cpu/tiny-20.jsonl"]),
        # The binary itself (not the bundle's wrapper script) under the tool,
        # with the library path the wrapper would set.
        Check("memcheck", "LD_LIBRARY_PATH=$KIT/bundle/lib:${CUDA_HOME:-/usr/local/cuda}"
              "/lib64:$LD_LIBRARY_PATH OMP_WAIT_POLICY=passive compute-sanitizer"
              " --tool memcheck --leak-check no"
              f" bundle/libexec/hypipe-run art/all-kinds --steps 1 -q --data {DATA}"
              " > $OUT/memcheck.txt 2>&1; tail -5 $OUT/memcheck.txt;"
              " grep -q 'ERROR SUMMARY: 0 errors' $OUT/memcheck.txt", 60,
              ["bundle/libexec/hypipe-run"]),
    ], "the CUDA target against the CPU target and PyTorch (float64)"),
    Suite("bf16", 200, [
        bf16_check("all-kinds", "1e-3"), bf16_check("untied-rope", "1e-3"),
        bf16_check("gelu", "1e-3"), bf16_check("mtp", "5e-3"),
        Check("bf16-tiny-200", f"{RUN} art/tiny-bf16 --steps 200 --json-log"
              f" $OUT/tiny-bf16.jsonl -q --data {DATA} && python3 py/losses.py"
              " cpu/tiny-bf16.jsonl $OUT/tiny-bf16.jsonl --first-rtol 1e-4 --rtol 2e-2", 60,
              ["art/tiny-bf16/manifest.json", "cpu/tiny-bf16.jsonl", "py/losses.py"]),
        Check("bf16-memcheck", "LD_LIBRARY_PATH=$KIT/bundle/lib:${CUDA_HOME:-/usr/local/cuda}"
              "/lib64:$LD_LIBRARY_PATH OMP_WAIT_POLICY=passive compute-sanitizer"
              " --tool memcheck --leak-check no"
              f" bundle/libexec/hypipe-run art/all-kinds-bf16 --steps 1 -q --data {DATA}"
              " > $OUT/memcheck-bf16.txt 2>&1; tail -5 $OUT/memcheck-bf16.txt;"
              " grep -q 'ERROR SUMMARY: 0 errors' $OUT/memcheck-bf16.txt", 60,
              ["bundle/libexec/hypipe-run", "art/all-kinds-bf16/manifest.json"]),
        Check("bf16-gpu-bench-step", f"{RUN} art/gpu-bench-bf16 --steps 6 --json-log"
              f" $OUT/bench-bf16.jsonl -q --data {DATA} && python3 run.py --bench-figures"
              " $OUT/bench-bf16.jsonl", 60,
              ["art/gpu-bench-bf16/manifest.json", "art/gpu-bench.explain.json"]),
    ], "bf16 (issue 33): the CUDA kernels against the CPU's exact emulation and"
       " PyTorch under the same rules, 200 steps, memcheck, tokens/s on tensor cores"),
    Suite("transports", 170, [
        # NCCL through hypipe's own transport at communicator size 1: the
        # collectives of one (point-to-point needs two GPUs: ctest -L gpu-multi).
        Check("nccl-size-1", "source mpi/env.sh && mpirun -np 1 --allow-run-as-root"
              " bundle/bin/hypipe-transport-tests --comm nccl --device cuda", 30,
              ["bundle/bin/hypipe-transport-tests", "mpi/env.sh"], ["nccl"]),
        # The conformance suite with GPU buffers, four ranks on the one GPU.
        Check("mpi-staged-4", "source mpi/env.sh && mpirun -np 4 --allow-run-as-root"
              " --oversubscribe bundle/bin/hypipe-transport-tests --comm mpi-staged"
              " --device cuda --pp 2", 40,
              ["bundle/bin/hypipe-transport-tests", "mpi/env.sh"]),
        Check("p2d2-staged", "source mpi/env.sh && mpirun -np 4 --allow-run-as-root"
              f" --oversubscribe {RUN} art/tiny-p2d2-fp32 --comm mpi-staged --steps 20"
              f" --json-log $OUT/p2d2.jsonl -q --data {DATA} && python3 py/losses.py"
              " cpu/tiny-p2d2-fp32.jsonl $OUT/p2d2.jsonl --first-rtol 1e-5 --rtol 2e-3", 60,
              ["art/tiny-p2d2-fp32/manifest.json", "cpu/tiny-p2d2-fp32.jsonl",
               "py/losses.py", "mpi/env.sh"]),
        # The distributed optimizer's shards follow 10 KiB buckets
        # (ShardLayout.h): each bucket reduce-scattered inside the last
        # backward and its updated part gathered as bf16 into its place. On
        # the cpu target at dp 2 the bits are one bucket a stage's, so the
        # cpu run of the default buckets is the reference.
        Check("p2d2-staged-bf16", "source mpi/env.sh && mpirun -np 4 --allow-run-as-root"
              f" --oversubscribe {RUN} art/tiny-p2d2-bf16 --comm mpi-staged --steps 20"
              " --grad-bucket-mib 0.01"
              f" --json-log $OUT/p2d2-bf16.jsonl -q --data {DATA} && python3 py/losses.py"
              " cpu/tiny-p2d2-bf16.jsonl $OUT/p2d2-bf16.jsonl --first-rtol 1e-4 --rtol 2e-2"
              " && python3 -c \"import json, sys;"
              " n = [json.loads(l)['dp_buckets_in_backward'] for l in open(sys.argv[1])];"
              " print('buckets in backward', n); sys.exit(0 if min(n) > 0 else 1)\""
              " $OUT/p2d2-bf16.jsonl",
              60, ["art/tiny-p2d2-bf16/manifest.json", "cpu/tiny-p2d2-bf16.jsonl",
                   "py/losses.py", "mpi/env.sh"]),
        # The all-reduce started bucket by bucket inside the last backward
        # (GradientBuckets.h), GPU buffers staged through the host: the cpu
        # target's losses, and buckets started inside the pass.
        Check("p2d2-staged-buckets", "source mpi/env.sh && mpirun -np 4 --allow-run-as-root"
              f" --oversubscribe {RUN} art/tiny-p2d2-buckets --comm mpi-staged --steps 20"
              f" --grad-bucket-mib 0.01 --json-log $OUT/p2d2-buckets.jsonl -q --data {DATA}"
              " && python3 py/losses.py cpu/tiny-p2d2-buckets.jsonl $OUT/p2d2-buckets.jsonl"
              " --first-rtol 1e-5 --rtol 2e-3 && python3 -c \"import json, sys;"
              " n = [json.loads(l)['dp_buckets_in_backward'] for l in open(sys.argv[1])];"
              " print('buckets in backward', n); sys.exit(0 if min(n) > 0 else 1)\""
              " $OUT/p2d2-buckets.jsonl", 60,
              ["art/tiny-p2d2-buckets/manifest.json", "cpu/tiny-p2d2-buckets.jsonl",
               "py/losses.py", "mpi/env.sh"]),
        # kill -9 of one GPU rank at step 3 ends all four within 60 s (not 124).
        Check("kill-one-rank", "source mpi/env.sh; HYPIPE_FAULT_KILL=1:3 timeout 60"
              " mpirun -np 4 --allow-run-as-root --oversubscribe -x HYPIPE_FAULT_KILL"
              f" {RUN} art/tiny-p2d2-fp32 --comm mpi-staged --steps 10 -q --data {DATA};"
              " rc=$?; echo exit $rc; test $rc -ne 0 -a $rc -ne 124", 70,
              ["art/tiny-p2d2-fp32/manifest.json", "mpi/env.sh"]),
    ], "several ranks on the one GPU (issue 36): NCCL at size 1, the transport"
       " conformance suite and pp 2 x dp 2 training over mpi-staged, a lost rank"),
    Suite("probes", 60, [
        Check("nccl-self", "probes/nccl_self", 20, ["probes/nccl_self"], ["nccl"]),
        Check("cuda-ipc", "probes/cuda_ipc", 20, ["probes/cuda_ipc"]),
        Check("mpi-share-gpu", "source mpi/env.sh && mpirun -np 2 --allow-run-as-root"
              " --oversubscribe probes/mpi_share_gpu", 20,
              ["probes/mpi_share_gpu", "mpi/env.sh", "mpi/bin/orterun"]),
        Check("cudnn-sdpa", "probes/cudnn_sdpa", 30, ["probes/cudnn_sdpa"], ["cudnn"]),
    ], "what the transports and GPU-speed work will stand on"),
    Suite("baselines", 160, [
        Check("cublas-gemm", f"probes/cublas_gemm {BENCH_GEMMS}", 30, ["probes/cublas_gemm"]),
        Check("sdpa-flash", "python3 py/sdpa_bench.py", 30, ["py/sdpa_bench.py"]),
        Check("torch-train-step", "PEER_COMPILE_BUDGET_S=60 python3 py/peer_train_gpu.py"
              f" art/gpu-bench 6 --data {DATA}", 110,
              ["py/peer_train_gpu.py", "py/peer_train.py", "art/gpu-bench/manifest.json"]),
    ], "what a skilled PyTorch or cuBLAS user gets on this GPU"),
    Suite("bench", 80, [
        Check("gpu-bench-step", f"{RUN} art/gpu-bench --steps 6 --json-log $OUT/bench.jsonl"
              f" -q --data {DATA} && python3 run.py --bench-figures $OUT/bench.jsonl", 60,
              ["art/gpu-bench/manifest.json", "art/gpu-bench.explain.json"]),
        Check("kernel-classes", f"CUDA_INJECTION64_PATH=$KIT/probes/libkernel_times.so"
              f" HYPIPE_KERNEL_TIMES=$OUT/kernel_times.csv {RUN} art/gpu-bench --steps 3 -q"
              f" --data {DATA} && python3 probes/classify_kernels.py $OUT/kernel_times.csv --steps 3"
              " --gemm-flops $(awk '/^gemm_flops_per_token/ {printf \"%.0f\", $2 * 4096}'"
              " art/gpu-bench.size) --peak-tflops 67", 60,
              ["probes/libkernel_times.so", "probes/classify_kernels.py",
               "art/gpu-bench.size"]),
    ], "hypipe on the benchmark model: tokens/s, MFU, time per kernel class"),
]


def gpu_visible():
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x") == "":
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def find_library(soname):
    """Directories holding `soname`: the loader's cache, the CUDA toolkit,
    then the Python environment's NVIDIA packages (where PyTorch's NCCL and
    cuDNN live on a node that has no system copy)."""
    found = []
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        found += [os.path.dirname(l.split("=>")[-1].strip()) for l in cache.splitlines()
                  if l.strip().startswith(soname + " ")]
    except OSError:
        pass
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    patterns = [f"{cuda}/lib64/{soname}", f"{cuda}/targets/*/lib/{soname}"]
    try:
        import site
        for sp in site.getsitepackages() + [site.getusersitepackages()]:
            patterns.append(f"{sp}/nvidia/*/lib/{soname}")
            patterns.append(f"{sp}/torch/lib/{soname}")
    except (ImportError, AttributeError):
        pass
    patterns.append(f"/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib/{soname}")
    for p in patterns:
        found += [os.path.dirname(f) for f in glob.glob(p)]
    return list(dict.fromkeys(found))


LIBRARIES = {"nccl": "libnccl.so.2", "cudnn": "libcudnn.so.9"}


def find_libraries():
    """--find-libraries: where the node has NCCL and cuDNN, as figures."""
    for key, soname in LIBRARIES.items():
        dirs = find_library(soname)
        print(f"{soname}: {', '.join(dirs) if dirs else 'not found'}")
        print(f"@figure {key}_found {1 if dirs else 0} -")
    return 0


def bench_figures(log):
    """--bench-figures: tokens/s and MFU of the benchmark model from a
    hypipe-run --json-log, skipping the first step (allocation, cuBLAS
    heuristics), with the model's FLOPs per token from hypipe's cost model."""
    steps = [json.loads(l) for l in open(log) if l.strip()]
    timed = steps[1:] or steps
    tokens = sum(s["tokens"] for s in timed)
    seconds = sum(s["tokens"] / s["tokens_per_s"] for s in timed)
    explain = json.load(open(os.path.join(KIT, "art/gpu-bench.explain.json")))
    flops = sum(s["forward_flops"] + s["backward_input_flops"] + s["backward_weight_flops"]
                for s in explain["stages"])
    # The stage table's FLOPs are per microbatch.
    per_token = flops / (steps[0]["tokens"] / steps[0]["microbatches"])
    tps = tokens / seconds
    bf16, fp32, _ = peaks()
    print(f"{len(timed)} timed steps: {tps:,.0f} tokens/s, {per_token / 1e9:.2f} GFLOP/token")
    print(f"@figure tokens_per_s {tps:.1f} tok/s")
    print(f"@figure model_tflops {tps * per_token / 1e12:.2f} TFLOP/s")
    print(f"@figure mfu_bf16_peak {100 * tps * per_token / (bf16 * 1e12):.2f} %")
    print(f"@figure mfu_fp32_peak {100 * tps * per_token / (fp32 * 1e12):.2f} %")
    return 0


def peaks():
    name = os.environ.get("HYPIPE_KIT_GPU", "")
    for key, value in PEAKS.items():
        if key in name:
            return value
    return PEAKS["H100"]


FIGURE = re.compile(r"^@figure\s+([a-z0-9_]+)\s+(\S+)\s*(.*)$")


def run_check(check, out, env, budget):
    log_path = os.path.join(out, "logs", f"{check.name}.log")
    start = time.monotonic()
    limit = max(1.0, min(check.timeout, budget))
    result = {"name": check.name, "command": check.command, "limit_s": round(limit, 1),
              "log": os.path.relpath(log_path, out), "figures": {}}
    with open(log_path, "w") as log:
        log.write(f"$ {check.command}\n")
        log.flush()
        try:
            proc = subprocess.Popen(["bash", "-c", "set -o pipefail; " + check.command],
                                    cwd=KIT, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True,
                                    errors="replace", start_new_session=True)
            text, _ = proc.communicate(timeout=limit)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            text, _ = proc.communicate()
            code = None
        log.write(text)
    for line in text.splitlines():
        m = FIGURE.match(line.strip())
        if m:
            try:
                result["figures"][m.group(1)] = {"value": float(m.group(2)),
                                                 "unit": m.group(3).strip() or "-"}
            except ValueError:
                pass
    tail = [l for l in text.splitlines() if l.strip() and not l.startswith("@figure")]
    result["seconds"] = round(time.monotonic() - start, 2)
    result["exit_code"] = code
    if code is None:
        result["status"] = "failed"
        result["reason"] = f"timed out after {limit:.0f} s"
    elif code == 0:
        result["status"] = "passed"
    elif code == 77:
        result["status"] = "skipped"
        result["reason"] = tail[-1][:200] if tail else "skipped"
    else:
        result["status"] = "failed"
        result["reason"] = (f"exit {code}: " + tail[-1][:200]) if tail else f"exit {code}"
    return result


def suite_status(checks):
    states = {c["status"] for c in checks}
    if "failed" in states:
        return "failed"
    if states <= {"skipped"}:
        return "skipped"
    return "passed"


def unpack_libraries():
    """Libraries that travel compressed (OpenBLAS), unpacked beside."""
    for packed in glob.glob(os.path.join(KIT, "bundle", "lib", "*.xz")):
        if not os.path.exists(packed[:-3]):
            with lzma.open(packed) as src, open(packed[:-3] + ".part", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.replace(packed[:-3] + ".part", packed[:-3])


def run_suites(out, names):
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    unpack_libraries()
    have_gpu = gpu_visible()
    env = dict(os.environ, KIT=KIT, OUT=os.path.abspath(out), PYTHONUNBUFFERED="1")
    cuda = env.get("CUDA_HOME", "/usr/local/cuda")
    env["PATH"] = f"{cuda}/bin:{env.get('PATH', '')}"
    found = {}
    if have_gpu:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip()
        env["HYPIPE_KIT_GPU"] = name
        # NCCL and cuDNN, wherever the node has them, for every check after.
        for key, soname in LIBRARIES.items():
            dirs = find_library(soname)
            if dirs:
                found[key] = dirs[0]
        extra = ":".join(found.values())
        if extra:
            env["LD_LIBRARY_PATH"] = extra + (":" + env["LD_LIBRARY_PATH"]
                                              if env.get("LD_LIBRARY_PATH") else "")
    report = {"kit": kit_info(), "host": os.uname().nodename,
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "gpu": have_gpu, "libraries": found, "suites": []}
    start = time.monotonic()
    for suite in SUITES:
        if names and suite.name not in names:
            continue
        s_start = time.monotonic()
        entry = {"name": suite.name, "what": suite.what, "limit_s": suite.limit, "checks": []}
        lacks = {c.name: [f for f in c.needs if not os.path.exists(os.path.join(KIT, f))]
                 for c in suite.checks}
        missing = sorted({f for files in lacks.values() for f in files})
        if missing or not have_gpu:
            entry["checks"] = [{"name": c.name, "figures": {}, "seconds": 0,
                                "status": "failed" if lacks[c.name] else "skipped",
                                "reason": ("the kit lacks " + ", ".join(lacks[c.name])
                                           if lacks[c.name] else "no GPU")}
                               for c in suite.checks]
            entry["status"] = "failed" if missing else "skipped"
            entry["reason"] = ("the kit lacks " + ", ".join(missing) if missing
                               else "no GPU")
        else:
            for check in suite.checks:
                left = suite.limit - (time.monotonic() - s_start)
                lacking = [r for r in check.requires if r not in found]
                if lacking:
                    entry["checks"].append({"name": check.name, "status": "skipped",
                                            "reason": "node has no " + ", ".join(
                                                LIBRARIES[r] for r in lacking),
                                            "figures": {}, "seconds": 0})
                elif left < 1:
                    entry["checks"].append({"name": check.name, "status": "failed",
                                            "reason": "the suite's time ran out first",
                                            "figures": {}, "seconds": 0})
                else:
                    entry["checks"].append(run_check(check, out, env, left))
                c = entry["checks"][-1]
                print(f"[{suite.name}] {check.name}: {c['status']}"
                      + (f" ({c['reason']})" if c.get("reason") else "")
                      + f" {c['seconds']:.1f}s", flush=True)
            entry["status"] = suite_status(entry["checks"])
        entry["seconds"] = round(time.monotonic() - s_start, 2)
        print(f"== {suite.name}: {entry['status']}"
              + (f" ({entry['reason']})" if entry.get("reason") else "")
              + f" in {entry['seconds']:.1f}s", flush=True)
        report["suites"].append(entry)
    report["seconds"] = round(time.monotonic() - start, 2)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(markdown(report))
    print(markdown(report))
    return 0 if all(s["status"] != "failed" for s in report["suites"]) else 1


def kit_info():
    try:
        return json.load(open(os.path.join(KIT, "KIT.json")))
    except (OSError, ValueError):
        return {}


def markdown(report):
    kit = report["kit"]
    lines = [f"# GPU kit results: {report['host']}, {report['started']}", "",
             f"kit: commit {kit.get('commit', '?')}, built {kit.get('built', '?')};"
             f" GPU visible: {'yes' if report['gpu'] else 'no'};"
             f" {report['seconds']:.0f} s in all", "",
             "| suite | check | status | seconds | figures |", "|---|---|---|---|---|"]
    for s in report["suites"]:
        lines.append(f"| **{s['name']}** | | **{s['status']}**"
                     + (f": {s['reason']}" if s.get("reason") else "")
                     + f" | {s['seconds']:.1f} | |")
        for c in s["checks"]:
            figs = ", ".join(f"{k} {v['value']:g} {v['unit']}".rstrip(" -")
                             for k, v in c["figures"].items())
            status = c["status"] + (f": {c['reason']}" if c.get("reason") else "")
            lines.append(f"| | {c['name']} | {status.replace('|', '/')} "
                         f"| {c['seconds']:.1f} | {figs} |")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) >= 2 and argv[1] == "--find-libraries":
        return find_libraries()
    if len(argv) >= 3 and argv[1] == "--bench-figures":
        return bench_figures(argv[2])
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out, names = argv[1], argv[2:]
    unknown = [n for n in names if n not in {s.name for s in SUITES}]
    if unknown:
        print(f"error: no suite {', '.join(unknown)}; suites: "
              + ", ".join(s.name for s in SUITES), file=sys.stderr)
        return 2
    # Only an empty directory or an earlier run's: nothing else is overwritten.
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(
            os.path.join(out, "results.json")):
        print(f"error: {out} holds files of something else; give a new or empty"
              " directory", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    return run_suites(out, names)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
