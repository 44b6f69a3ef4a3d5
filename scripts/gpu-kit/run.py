#!/usr/bin/env python3
"""The GPU kit's driver: runs a plan of checks on a GPU node, in order, each
with its own time limit, and keeps its results whatever stops it.

A check is a shell command run in the kit's directory. It passes with exit
0, is skipped with exit 77 (it says why), and fails otherwise; it reports
figures as lines `@figure NAME VALUE UNIT`. Checks belong to suites (what
they check); a plan is an ordered list of checks. Names on the command line
are plans (`default`, `all`), suites (every check of it) or single checks
(`SUITE:CHECK`), run in the order given.

What comes back from a GPU call is at most 8 files, two folders deep, so OUT
holds three: results.json and results.md, rewritten after every check (and
before it, with the check marked running, so that a run killed from outside
still says where it was), and work.tar.gz, the checks' logs and everything
they wrote, packed from a work folder outside OUT at the end, at the
deadline, or on SIGTERM/SIGINT.

`--deadline S`: no check starts after S seconds from the start, and none runs
past it (its limit is cut to what is left). `--failed-in RESULTS.json`: only
the checks that failed (or never started) in an earlier run, in their order.
`--sync`: every CUDA launch and GEMM waits for its work (HYPIPE_CUDA_SYNC=1,
CUDA_LAUNCH_BLOCKING=1), so a failing kernel is named at its own launch.

On a machine without a GPU no check runs: each checks that the kit files it
reads are there and is marked "skipped: no GPU" (ctest's gpu-kit-dry-run).

usage: run.sh OUT [--deadline S] [--failed-in RESULTS.json] [--sync] [NAME...]
"""
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
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
# What one GPU call brings back (the device tool): files and their size.
MAX_FILES, MAX_FILE_BYTES = 8, 16 << 20
# A file a check wrote that is larger than this stays out of the archive
# (named in results.json): the archive must come back whole.
ARCHIVE_FILE_BYTES = 6 << 20
# Under memcheck, hypipe-run itself (not the bundle's wrapper script) runs
# under the tool: the wrapper's HYPIPE_RUN_UNDER.
MEMCHECK = ('HYPIPE_RUN_UNDER="compute-sanitizer --tool memcheck --leak-check no'
            ' --log-file $WORK/{name}.txt" OMP_WAIT_POLICY=passive')


class Check:
    def __init__(self, name, command, timeout, needs=(), requires=()):
        self.name, self.command, self.timeout = name, command, timeout
        self.needs = list(needs)  # kit files the command reads
        self.requires = list(requires)  # libraries found on the node
        self.suite = None


class Suite:
    def __init__(self, name, checks, what):
        self.name, self.checks, self.what = name, checks, what
        for c in checks:
            c.suite = name


def ref_check(spec):
    """One fp32 step of a reference spec: every gradient against the cpu
    target's dump and against PyTorch in float64."""
    return Check(
        "ref-" + spec,
        f"{RUN} art/{spec} --steps 1 --dump-step $WORK/{spec}.safetensors -q --data {DATA}"
        f" && python3 py/compare_dumps.py cpu/{spec}.safetensors $WORK/{spec}.safetensors 1e-4"
        f" vs_cpu && python3 py/torch_reference.py art/{spec} $WORK/{spec}.safetensors"
        " --figure vs_float64",
        12, [f"art/{spec}/manifest.json", f"cpu/{spec}.safetensors", RUN,
             "py/compare_dumps.py", "py/torch_reference.py"])


def bf16_check(spec, tol, env="", name=None):
    """The CUDA bf16 step of a reference spec against the CPU's bf16
    emulation (docs/precision.md: the same rounding points, so the two
    differ only where a sum's order moves a value across a bf16 rounding
    midpoint) and against the float64 reference under the bf16 rules, with
    test/e2e/bf16.test's tolerance for the spec. The distance to the float64
    model under the fp32 rules is printed beside it (a figure, not a
    condition): a run far from both is a bug, one near the bf16 rules only is
    accumulation order on the tensor cores."""
    name = name or f"bf16-{spec}"
    dump = f"$WORK/{name}.safetensors"
    return Check(
        name,
        f"{env + ' ' if env else ''}{RUN} art/{spec}-bf16 --steps 1 --dump-step {dump} -q"
        f" --data {DATA}"
        f" && python3 py/compare_dumps.py cpu/{spec}-bf16.safetensors {dump} {tol} vs_cpu_bf16"
        f" && python3 py/torch_reference.py art/{spec}-bf16 {dump} --tol {tol}"
        " --figure vs_float64_bf16_rules"
        f" && (python3 py/torch_reference.py art/{spec}-bf16 {dump} --rules fp32 --tol 1"
        " --figure vs_float64_fp32_rules || true)",
        12, [f"art/{spec}-bf16/manifest.json", f"cpu/{spec}-bf16.safetensors", RUN,
             "py/compare_dumps.py", "py/torch_reference.py"])


def recompute_check():
    """Full and selective recompute on the CUDA target: one step's gradients
    and loss bit for bit those without recompute (as test/e2e/bit-identical
    checks on the cpu target). A difference is either recompute's or the
    GPU kernels' run-to-run nondeterminism: plan:all's rerun tells."""
    one = f"{RUN} art/{{art}} --steps 1 --dump-step $WORK/{{dump}}.safetensors -q --data {DATA}"
    same = "python3 py/compare_dumps.py $WORK/rc-plain.safetensors $WORK/{dump}.safetensors 0 {dump}"
    parts = [one.format(art="all-kinds", dump="rc-plain")]
    for kind in ("full", "selective"):
        parts += [one.format(art=f"all-kinds-rc-{kind}", dump=f"rc-{kind}"),
                  same.format(dump=f"rc-{kind}")]
    return Check("recompute-bitwise", " && ".join(parts), 10,
                 ["art/all-kinds/manifest.json", "art/all-kinds-rc-full/manifest.json",
                  "art/all-kinds-rc-selective/manifest.json", "py/compare_dumps.py", RUN])


def saved_bf16_check():
    """bf16 saved tensors packed in two bytes (runtime/exec/SavedBuffers.h)
    on the CUDA target: GPipe's three microbatches in flight, one step's
    gradients bit for bit those of --saved-fp32 (four bytes each; a
    difference is the packing's or run-to-run nondeterminism: a rerun
    tells) and within bf16.test's 1e-3 of the CPU's packed run."""
    one = (f"{RUN} art/all-kinds-bf16-gpipe --steps 1 -q --data {DATA}"
           " --dump-step $WORK/saved-{kind}.safetensors{flag}")
    return Check(
        "bf16-saved-bitwise",
        one.format(kind="packed", flag="") + " && "
        + one.format(kind="fp32", flag=" --saved-fp32")
        + " && python3 py/compare_dumps.py $WORK/saved-fp32.safetensors"
        " $WORK/saved-packed.safetensors 0 packed_vs_fp32"
        " && python3 py/compare_dumps.py cpu/all-kinds-bf16-gpipe.safetensors"
        " $WORK/saved-packed.safetensors 1e-3 vs_cpu_bf16", 10,
        ["art/all-kinds-bf16-gpipe/manifest.json",
         "cpu/all-kinds-bf16-gpipe.safetensors", "py/compare_dumps.py", RUN])


def fused_attention_check():
    """cuDNN's fused attention (runtime/kernels/cuda/FusedAttention.h)
    required (HYPIPE_FUSED_ATTN=1: a missing cuDNN or plan fails the check)
    on packed samples, every microbatch ragged: 30 steps of the packed
    example in bf16 against the cpu target's bf16 losses, at bf16-tiny-200's
    tolerance (cuDNN rounds the probabilities to bf16 before P V, the CPU's
    emulation does not: docs/cuda.md)."""
    return Check(
        "fused-attention-packed",
        f"HYPIPE_FUSED_ATTN=1 {RUN} art/packed-bf16 --steps 30 --json-log"
        " $WORK/fused-attention-packed.jsonl -q && python3 py/losses.py"
        " cpu/packed-bf16.jsonl $WORK/fused-attention-packed.jsonl"
        " --first-rtol 2e-3 --rtol 2e-2", 10,
        ["art/packed-bf16/manifest.json", "cpu/packed-bf16.jsonl", "py/losses.py", RUN])


def bench_check(name, art, steps, peak, timeout, env="", kernel_times=True):
    """The benchmark model: tokens/s and MFU (and, with the CUPTI injection
    library, the time of every kernel class) over `steps` steps."""
    times = f"$WORK/kernel_times_{name}.csv"
    command = (f"CUDA_INJECTION64_PATH=$KIT/probes/libkernel_times.so HYPIPE_KERNEL_TIMES={times} "
               if kernel_times else "")
    command += (f"{env + ' ' if env else ''}{RUN} art/{art} --steps {steps}"
                f" --json-log $WORK/{name}.jsonl -q --data {DATA}"
                f" && python3 run.py --bench-figures $WORK/{name}.jsonl")
    needs = [f"art/{art}/manifest.json", "art/gpu-bench.explain.json", "art/gpu-bench.size"]
    if kernel_times:
        command += (f" && python3 probes/classify_kernels.py {times} --steps {steps}"
                    " --gemm-flops $(awk '/^gemm_flops_per_token/ {printf \"%.0f\", $2 * 4096}'"
                    f" art/gpu-bench.size) --peak-tflops {peak}")
        needs += ["probes/libkernel_times.so", "probes/classify_kernels.py"]
    return Check(name, command, timeout, needs)


def memcheck(name, art):
    return Check(
        name, MEMCHECK.format(name=name) + f" {RUN} art/{art} --steps 1 -q --data {DATA};"
        f" rc=$?; tail -3 $WORK/{name}.txt; test $rc -eq 0 &&"
        f" grep -q 'ERROR SUMMARY: 0 errors' $WORK/{name}.txt", 20,
        [f"art/{art}/manifest.json", RUN])


def losses_check(name, art, steps, reference, rtol, first_rtol, extra="", timeout=12):
    return Check(
        name, f"{RUN} art/{art} --steps {steps} --json-log $WORK/{name}.jsonl -q {extra}"
        f" && python3 py/losses.py cpu/{reference}.jsonl $WORK/{name}.jsonl"
        f" --first-rtol {first_rtol} --rtol {rtol}", timeout,
        [f"art/{art}/manifest.json", f"cpu/{reference}.jsonl", "py/losses.py"])


def staged_check(name, art, reference, first_rtol, rtol, extra="", buckets=False,
                 ranks=4, timeout=15, env="", data=DATA):
    """`ranks` ranks on the one GPU over mpi-staged against the cpu target's
    run of the same model here (`env`: variables set for the ranks; `data`
    None: the spec's own, mock data)."""
    command = (f"source mpi/env.sh && {env + ' ' if env else ''}mpirun -np {ranks}"
               " --allow-run-as-root --oversubscribe"
               f" {RUN} art/{art} --comm mpi-staged --steps 10 {extra}"
               f" --json-log $WORK/{name}.jsonl -q" + (f" --data {data}" if data else "")
               + f" && python3 py/losses.py cpu/{reference}.jsonl $WORK/{name}.jsonl"
               f" --first-rtol {first_rtol} --rtol {rtol}")
    if buckets:  # the buckets started inside the last backward, every step
        command += (" && python3 -c \"import json, sys;"
                    " n = [json.loads(l)['dp_buckets_in_backward'] for l in open(sys.argv[1])];"
                    " print('buckets in backward', n); sys.exit(0 if min(n) > 0 else 1)\""
                    f" $WORK/{name}.jsonl")
    return Check(name, command, timeout, [f"art/{art}/manifest.json",
                                          f"cpu/{reference}.jsonl", "py/losses.py",
                                          "mpi/env.sh"])


SUITES = [
    Suite("environment", [
        Check("device", "nvidia-smi --query-gpu=name,memory.total,driver_version,"
              "compute_cap --format=csv,noheader && nvidia-smi -q | grep -i 'CUDA Version'"
              " && (nvcc --version | tail -2 || true)", 5),
        # Every binary's libraries resolve with the library path the
        # bundle's wrapper sets, NCCL and cuDNN found where the node has them.
        Check("libraries", "python3 run.py --check-libraries", 10, ["run.py"]),
        Check("ncu", "ncu --version | tail -1 && ncu --clock-control none --metrics "
              "gpu__time_duration.sum probes/cublas_gemm --smoke > $WORK/ncu.txt 2>&1;"
              " grep gpu__time_duration $WORK/ncu.txt", 15, ["probes/cublas_gemm"]),
    ], "the GPU, driver, CUDA, the libraries a node offers, the tools"),
    Suite("correctness", [
        ref_check("all-kinds"), ref_check("untied-rope"), ref_check("gelu"), ref_check("mtp"),
        # Gated DeltaNet layers (G): their CUDA kernels never ran on a GPU.
        ref_check("gdn"),
        ref_check("mla"),
        # DeepSeek sparse attention (D): its CUDA kernels never ran on a GPU.
        ref_check("dsa"),
        # The linear cross-entropy (issue 54): the MTP spec's losses a chunk
        # of 7 tokens at a time; plan `all` (the default plan is full).
        ref_check("mtp-linear"),
        recompute_check(),
        losses_check("tiny-200", "tiny", 200, "tiny", "2e-3", "1e-5", f"--data {DATA}"),
        losses_check("packed-30", "packed", 30, "packed", "1e-3", "1e-5", timeout=8),
        Check("checkpoint-gpu-to-cpu",
              f"{RUN} art/tiny --steps 10 --lr-decay-steps 20 --save $WORK/ckpt -q --data {DATA}"
              f" && {RUN} art/tiny-cpu --resume $WORK/ckpt --steps 20 --json-log"
              f" $WORK/resumed.jsonl -q --data {DATA} && python3 py/losses.py"
              " cpu/tiny-20.jsonl $WORK/resumed.jsonl --from-step 11 --rtol 1e-4", 12,
              ["art/tiny-cpu/manifest.json", "cpu/tiny-20.jsonl"]),
        memcheck("memcheck", "all-kinds"),
    ], "the CUDA target against the CPU target and PyTorch (float64)"),
    Suite("bf16", [
        bf16_check("all-kinds", "1e-3"), bf16_check("untied-rope", "1e-3"),
        bf16_check("gelu", "1e-3"), bf16_check("mtp", "5e-3"), bf16_check("gdn", "1e-3"),
        # MLA (multi-latent attention, '+'): test/e2e/bf16.test's 5e-3 (in
        # the default plan, after gdn's).
        bf16_check("mla", "5e-3"),
        # DeepSeek sparse attention (D): test/e2e/dsa-train.test's 5e-3 (in
        # plan `all`: the default plan's limits are full).
        bf16_check("dsa", "5e-3"),
        losses_check("bf16-tiny-200", "tiny-bf16", 200, "tiny-bf16", "2e-2", "1e-4",
                     f"--data {DATA}"),
        memcheck("bf16-memcheck", "all-kinds-bf16"),
        saved_bf16_check(),
        fused_attention_check(),
        # The hand-written attention kernels in bf16 (HYPIPE_FUSED_ATTN=0;
        # plan all): what tells a failure of bf16-all-kinds, which takes
        # cuDNN's fused attention where it is found, apart.
        bf16_check("all-kinds", "1e-3", "HYPIPE_FUSED_ATTN=0", "bf16-native-attention"),
    ], "bf16 (issue 33): the CUDA kernels against the CPU's exact emulation and"
       " PyTorch under the same rules, 200 steps, memcheck"),
    Suite("bench", [
        # One run gives tokens/s, MFU and the time per kernel class: the
        # CUPTI injection library times every kernel of the same steps.
        # bf16 with cuDNN's fused attention required, then (the switch of
        # issue 54's piece) with the hand-written attention kernels.
        bench_check("gpu-bench-bf16", "gpu-bench-bf16", 4, 989, 45, "HYPIPE_FUSED_ATTN=1"),
        bench_check("gpu-bench-bf16-native-attn", "gpu-bench-bf16", 3, 989, 35,
                    "HYPIPE_FUSED_ATTN=0"),
        bench_check("gpu-bench-fp32", "gpu-bench", 3, 67, 45),
    ], "hypipe on the benchmark model: tokens/s, MFU, time per kernel class"),
    Suite("baselines", [
        # cuBLAS as the tensor cores give it (bf16 operands) and in hypipe's
        # own bf16 mode (fp32 operands, COMPUTE_32F_FAST_16BF), each for the
        # forward, input-gradient and weight-gradient (beta 1) products.
        Check("cublas-gemm", f"probes/cublas_gemm {BENCH_GEMMS}", 15, ["probes/cublas_gemm"]),
        Check("sdpa-flash", "python3 py/sdpa_bench.py", 15, ["py/sdpa_bench.py"]),
        Check("torch-train-step", "PEER_COMPILE_BUDGET_S=30 python3 py/peer_train_gpu.py"
              f" art/gpu-bench 4 --warmup 1 --data {DATA}", 44,
              ["py/peer_train_gpu.py", "py/peer_train.py", "art/gpu-bench/manifest.json"]),
    ], "what a skilled PyTorch or cuBLAS user gets on this GPU"),
    Suite("transports", [
        # NCCL through hypipe's own transport at communicator size 1: the
        # collectives of one (point-to-point needs two GPUs: ctest -L gpu-multi).
        Check("nccl-size-1", "source mpi/env.sh && mpirun -np 1 --allow-run-as-root"
              " bundle/bin/hypipe-transport-tests --comm nccl --device cuda", 8,
              ["bundle/bin/hypipe-transport-tests", "mpi/env.sh"], ["nccl"]),
        # The conformance suite with GPU buffers, four ranks on the one GPU.
        Check("mpi-staged-4", "source mpi/env.sh && mpirun -np 4 --allow-run-as-root"
              " --oversubscribe bundle/bin/hypipe-transport-tests --comm mpi-staged"
              " --device cuda --pp 2", 12,
              ["bundle/bin/hypipe-transport-tests", "mpi/env.sh"]),
        staged_check("p2d2-staged", "tiny-p2d2-fp32", "tiny-p2d2-fp32", "1e-5", "2e-3"),
        # The distributed optimizer's shards follow 10 KiB buckets
        # (ShardLayout.h): each bucket reduce-scattered inside the last
        # backward and its updated part gathered as bf16 into its place. On
        # the cpu target at dp 2 the bits are one bucket a stage's, so the
        # cpu run of the default buckets is the reference.
        staged_check("p2d2-staged-bf16", "tiny-p2d2-bf16", "tiny-p2d2-bf16", "1e-4", "2e-2",
                     "--grad-bucket-mib 0.01", buckets=True),
        # The all-reduce started bucket by bucket inside the last backward
        # (GradientBuckets.h), GPU buffers staged through the host.
        staged_check("p2d2-staged-buckets", "tiny-p2d2-buckets", "tiny-p2d2-buckets",
                     "1e-5", "2e-3", "--grad-bucket-mib 0.01", buckets=True),
        # Tensor parallelism (issue 49): tp 2 with sequence parallelism, its
        # collectives, the vocabulary-parallel cross-entropy's CUDA kernels
        # and the MoE layer's routing kernels under tp-split experts (and in
        # an MTP depth), two ranks on the one GPU over mpi-staged, against
        # the cpu target's tp 1 run of the same spec.
        staged_check("tp2-sp-staged", "tp2-sp", "tp", "1e-5", "2e-3", ranks=2, timeout=8),
        # Expert parallelism inside the tensor-parallel group (issue 50):
        # tp 2 x ep 2 (etp 1), each rank one half of every MoE layer's
        # experts in its slots, against the same cpu tp 1 run. In the
        # default plan, after tp2-sp-staged.
        staged_check("tp2-ep2-staged", "tp2-ep2", "tp", "1e-5", "2e-3", ranks=2, timeout=8),
        # The alltoall dispatcher (issue 50) on the same grid, in the model
        # with multi-latent attention ('+', split by heads, issue 52): the
        # routed rows exchanged with MPI_Ialltoallv through pinned staging
        # buffers, the row map downloaded for the plan of the exchange, the
        # latents' gradients reduce-scattered, tokens dropped at capacity 1
        # (the CUDA router's keepWithinCapacity); against the cpu target's
        # run of the same layout.
        staged_check("tp2-ep2-a2a-staged", "tp2-ep2-a2a", "tp-mla", "1e-5", "2e-3", ranks=2,
                     timeout=8),
        # The same dispatcher in the MoE model alone, dropless, against the
        # cpu tp 1 run (plan all: what tells a failure above apart).
        staged_check("tp2-ep2-a2a-moe-staged", "tp2-ep2-a2a-moe", "tp", "1e-5", "2e-3",
                     ranks=2, timeout=8),
        # Expert parallelism over data-parallel replicas (issue 50): dp 2 x
        # ep 2, two ranks on the one GPU, each replica's routing statistics
        # its own (the CUDA router's per-replica counts and aux loss), the
        # expert slots summed over the expert-data-parallel group, against
        # the cpu target's run of the same layout (plan all).
        staged_check("dp2-ep2-staged", "dp2-ep2", "dp2-ep2", "1e-5", "2e-3", ranks=2,
                     timeout=8),
        # The same with the distributed optimizer (plan all), in 4 KiB buckets
        # and 1000-float chunks: the reduce-scatters and gathers over the
        # expert-data-parallel group and the replicas on GPU buffers.
        staged_check("dp2-ep2-dist-staged", "dp2-ep2-dist", "dp2-ep2", "1e-5", "2e-3",
                     extra="--grad-bucket-mib 0.004", ranks=2, timeout=8,
                     env="HYPIPE_REPLICA_SCRATCH_FLOATS=1000"),
        # The same grid on packed mock samples (plan all): the replicas'
        # microbatches padded to the group's most rows, the CUDA router
        # leaving the padding out of its counts, dispatch and loss.
        staged_check("dp2-ep2-packed-staged", "dp2-ep2-packed", "dp2-ep2-packed", "1e-5",
                     "2e-3", ranks=2, timeout=8, data=None),
        # DeepSeek sparse attention ('D', issue 52) at tp 2 with sequence
        # parallelism: MLA's heads split, the indexer whole on each rank, the
        # KL loss's target summed over the two ranks (the CUDA kernels'
        # target difference and row range), against the cpu target's tp 1
        # run (plan all: the default plan's limits are full).
        staged_check("tp2-dsa-staged", "tp2-dsa", "dsa-tp", "1e-5", "2e-3", ranks=2,
                     timeout=8),
        # Gated DeltaNet ('G') at tp 2 with sequence parallelism: half the
        # key and value heads a rank, the out norm's gradient summed over
        # the two, against the cpu target's tp 1 run (plan all).
        staged_check("tp2-gdn-staged", "tp2-gdn", "gdn-tp", "1e-5", "2e-3", ranks=2,
                     timeout=8),
        # kill -9 of one GPU rank at step 3 ends all four within 12 s (not 124).
        Check("kill-one-rank", "source mpi/env.sh; HYPIPE_FAULT_KILL=1:3 timeout 12"
              " mpirun -np 4 --allow-run-as-root --oversubscribe -x HYPIPE_FAULT_KILL"
              f" {RUN} art/tiny-p2d2-fp32 --comm mpi-staged --steps 10 -q --data {DATA};"
              " rc=$?; echo exit $rc; test $rc -ne 0 -a $rc -ne 124", 15,
              ["art/tiny-p2d2-fp32/manifest.json", "mpi/env.sh"]),
    ], "several ranks on the one GPU (issue 36): NCCL at size 1, the transport"
       " conformance suite and pp 2 x dp 2 training over mpi-staged, a lost rank"),
    Suite("probes", [
        Check("nccl-self", "probes/nccl_self", 5, ["probes/nccl_self"], ["nccl"]),
        Check("cuda-ipc", "probes/cuda_ipc", 5, ["probes/cuda_ipc"]),
        Check("mpi-share-gpu", "source mpi/env.sh && mpirun -np 2 --allow-run-as-root"
              " --oversubscribe probes/mpi_share_gpu", 6,
              ["probes/mpi_share_gpu", "mpi/env.sh", "mpi/bin/orterun"]),
        Check("cudnn-sdpa", "probes/cudnn_sdpa", 8, ["probes/cudnn_sdpa"], ["cudnn"]),
    ], "what the transports and GPU-speed work will stand on"),
]
CHECKS = {f"{c.suite}:{c.name}": c for s in SUITES for c in s.checks}

# The first call on a GPU: ordered by the truth each second buys, every
# check's limit counted against the 420 s a first call may take (docs/cuda.md).
DEFAULT_PLAN = [
    "environment:device", "environment:libraries",
    "correctness:ref-all-kinds", "correctness:ref-untied-rope", "correctness:ref-gelu",
    "correctness:ref-mtp", "correctness:ref-gdn", "correctness:ref-mla", "correctness:ref-dsa",
    "correctness:recompute-bitwise",
    "bf16:bf16-all-kinds", "bf16:bf16-untied-rope", "bf16:bf16-gelu", "bf16:bf16-mtp",
    "bf16:bf16-gdn", "bf16:bf16-mla", "bf16:fused-attention-packed",
    "bench:gpu-bench-bf16", "bench:gpu-bench-bf16-native-attn",
    "baselines:cublas-gemm",
    "correctness:packed-30", "correctness:checkpoint-gpu-to-cpu",
    "bf16:bf16-tiny-200",
    "correctness:memcheck",
    "transports:nccl-size-1", "transports:mpi-staged-4", "transports:p2d2-staged",
    "transports:p2d2-staged-bf16", "transports:p2d2-staged-buckets",
    "transports:tp2-sp-staged", "transports:tp2-ep2-staged",
    # correctness:tiny-200, transports:tp2-ep2-a2a-staged and kill-one-rank
    # and probes:cudnn-sdpa (43 s) made room for cuDNN's fused attention
    # (issue 54) and its native-kernel bench beside it.
    # baselines:torch-train-step (44 s) made room for the two G checks
    # above, bf16:bf16-memcheck (20 s) for the D one: they run in plan `all`
    # or by name.
]
DEFAULT_PLAN_LIMIT_S = 420
PLANS = {"default": DEFAULT_PLAN, "all": list(CHECKS)}


def plan_limit(keys):
    return sum(CHECKS[k].timeout for k in keys)


def resolve(names):
    """The checks named, in order, each once: plans, suites, SUITE:CHECK, or
    a check's own name where only one suite has it."""
    keys, unknown = [], []
    for name in names:
        if name in PLANS:
            found = PLANS[name]
        elif name in {s.name for s in SUITES}:
            found = [k for k in CHECKS if CHECKS[k].suite == name]
        elif name in CHECKS:
            found = [name]
        else:
            found = [k for k in CHECKS if k.split(":", 1)[1] == name]
            if len(found) != 1:
                unknown.append(name)
                continue
        keys += [k for k in found if k not in keys]
    return keys, unknown


def gpu_visible():
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x") == "":
        return False
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def python_package_dirs():
    """site-packages folders of the Python environments a node may have:
    the running one, python3's on the PATH, and /opt/*/.venv (where the lent
    machines keep PyTorch with its NCCL and cuDNN)."""
    dirs = []
    try:
        import site
        dirs += site.getsitepackages() + [site.getusersitepackages()]
    except (ImportError, AttributeError):
        pass
    dirs += glob.glob("/opt/*/.venv/lib/python3*/site-packages")
    return list(dict.fromkeys(dirs))


def find_library(soname):
    """Directories holding `soname`: the loader's cache, the CUDA toolkit,
    then the Python environments' NVIDIA packages."""
    found = []
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
        found += [os.path.dirname(l.split("=>")[-1].strip()) for l in cache.splitlines()
                  if l.strip().startswith(soname + " ")]
    except OSError:
        pass
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    patterns = [f"{cuda}/lib64/{soname}", f"{cuda}/targets/*/lib/{soname}"]
    for sp in python_package_dirs():
        patterns += [f"{sp}/nvidia/*/lib/{soname}", f"{sp}/torch/lib/{soname}"]
    for p in patterns:
        found += [os.path.dirname(f) for f in glob.glob(p)]
    return list(dict.fromkeys(found))


LIBRARIES = {"nccl": "libnccl.so.2", "cudnn": "libcudnn.so.9"}


def check_libraries():
    """--check-libraries: where the node has NCCL and cuDNN (figures), and
    every binary of the kit resolves its libraries under the library path
    the bundle's wrapper sets (ldd; a missing one fails the check)."""
    for key, soname in LIBRARIES.items():
        dirs = find_library(soname)
        print(f"{soname}: {', '.join(dirs) if dirs else 'not found'}")
        print(f"@figure {key}_found {1 if dirs else 0} -")
    env = dict(os.environ)
    bundle = os.path.join(KIT, "bundle")
    path = subprocess.run(["sh", "-c", 'here="$0"; . "$here/env.sh" && printf %s "$LD_LIBRARY_PATH"',
                           bundle], capture_output=True, text=True, env=env)
    if path.returncode != 0 or not path.stdout:
        print(f"error: bundle/env.sh set no library path: {path.stderr.strip()}")
        return 1
    env["LD_LIBRARY_PATH"] = path.stdout
    print(f"library path: {path.stdout}")
    binaries = sorted(glob.glob(os.path.join(KIT, "bundle", "libexec", "*"))
                      + glob.glob(os.path.join(KIT, "bundle", "lib", "*.so*"))
                      + [p for p in glob.glob(os.path.join(KIT, "probes", "*"))
                         if os.access(p, os.X_OK) and not p.endswith((".sh", ".py"))])
    missing = []
    for b in binaries:
        if b.endswith(".xz"):
            continue
        out = subprocess.run(["ldd", b], capture_output=True, text=True, env=env).stdout
        missing += [f"{os.path.relpath(b, KIT)}: {l.strip()}" for l in out.splitlines()
                    if "not found" in l]
    print(f"ldd: {len(binaries)} binaries, {len(missing)} libraries not found")
    for m in missing:
        print("MISSING " + m)
    return 1 if missing else 0


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


class Runner:
    """Runs checks one after another and keeps OUT up to date."""

    def __init__(self, out, keys, deadline, sync):
        self.out, self.keys, self.deadline = out, keys, deadline
        self.work = tempfile.mkdtemp(prefix="hypipe-kit-work-")
        os.makedirs(os.path.join(self.work, "logs"))
        self.start = time.monotonic()
        self.proc = None
        self.stopped = None  # the signal's name once one arrived
        self.have_gpu = gpu_visible()
        self.env = dict(os.environ, KIT=KIT, WORK=self.work, PYTHONUNBUFFERED="1")
        cuda = self.env.get("CUDA_HOME", "/usr/local/cuda")
        self.env["PATH"] = f"{cuda}/bin:{self.env.get('PATH', '')}"
        if sync:
            self.env.update(HYPIPE_CUDA_SYNC="1", CUDA_LAUNCH_BLOCKING="1")
        self.found = {}
        if self.have_gpu:
            name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                  capture_output=True, text=True).stdout.strip()
            self.env["HYPIPE_KIT_GPU"] = name
            # NCCL and cuDNN, wherever the node has them, for every check
            # (the probes link them; hypipe-run's wrapper finds them itself).
            for key, soname in LIBRARIES.items():
                dirs = find_library(soname)
                if dirs:
                    self.found[key] = dirs[0]
            extra = ":".join(dict.fromkeys(self.found.values()))
            if extra:
                self.env["LD_LIBRARY_PATH"] = extra + (
                    ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
            # OpenBLAS unpacked (outside the kit) before the first check's clock.
            subprocess.run([os.path.join(KIT, RUN), "--version"], env=self.env,
                           capture_output=True)
        self.report = {
            "kit": kit_info(), "host": os.uname().nodename,
            "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "gpu": self.have_gpu, "libraries": self.found, "deadline_s": deadline,
            "sync": sync, "plan_limit_s": plan_limit(keys),
            "archive": "work.tar.gz", "left_out": [], "seconds": 0,
            "checks": [], "suites": []}

    def elapsed(self):
        return time.monotonic() - self.start

    def stop(self, signum, _frame):
        self.stopped = signal.Signals(signum).name
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)

    def lacks(self, check):
        return [f for f in check.needs if not os.path.exists(os.path.join(KIT, f))]

    def run(self):
        for key in self.keys:
            check = CHECKS[key]
            entry = {"name": check.name, "suite": check.suite, "limit_s": check.timeout,
                     "figures": {}, "seconds": 0}
            lacking = self.lacks(check)
            left = None if self.deadline is None else self.deadline - self.elapsed()
            if lacking:
                entry.update(status="failed", reason="the kit lacks " + ", ".join(lacking))
            elif self.stopped:
                entry.update(status="not started", reason=f"the run was ended ({self.stopped})")
            elif left is not None and left < 1:
                entry.update(status="not started",
                             reason=f"past the deadline ({self.deadline:g} s)")
            elif not self.have_gpu:
                entry.update(status="skipped", reason="no GPU")
            elif any(r not in self.found for r in check.requires):
                entry.update(status="skipped", reason="node has no " + ", ".join(
                    LIBRARIES[r] for r in check.requires if r not in self.found))
            else:
                entry.update(status="running")
                self.report["checks"].append(entry)
                self.write()
                self.report["checks"].pop()
                entry.update(self.execute(check, check.timeout if left is None
                                          else min(check.timeout, left)))
            self.report["checks"].append(entry)
            print(f"[{check.suite}] {check.name}: {entry['status']}"
                  + (f" ({entry['reason']})" if entry.get("reason") else "")
                  + f" {entry['seconds']:.1f}s", flush=True)
            self.write()
        self.pack()
        self.write()
        shutil.rmtree(self.work, ignore_errors=True)
        print(markdown(self.report))
        return 0 if all(c["status"] in ("passed", "skipped")
                        for c in self.report["checks"]) else 1

    def execute(self, check, limit):
        log_path = os.path.join(self.work, "logs", f"{check.suite}-{check.name}.log")
        start = time.monotonic()
        result = {"command": check.command, "limit_s": round(limit, 1), "figures": {},
                  "log": os.path.relpath(log_path, self.work)}
        with open(log_path, "w") as log:
            log.write(f"$ {check.command}\n")
            log.flush()
            self.proc = subprocess.Popen(["bash", "-c", "set -o pipefail; " + check.command],
                                         cwd=KIT, env=self.env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True,
                                         errors="replace", start_new_session=True)
            try:
                text, _ = self.proc.communicate(timeout=limit)
                code = None if self.stopped else self.proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                text, _ = self.proc.communicate()
                code = None
            log.write(text)
        self.proc = None
        for line in text.splitlines():
            m = FIGURE.match(line.strip())
            if m:
                try:
                    result["figures"][m.group(1)] = {"value": float(m.group(2)),
                                                     "unit": m.group(3).strip() or "-"}
                except ValueError:
                    pass
        tail = [l for l in text.splitlines() if l.strip() and not l.startswith("@figure")]
        # The reason a check failed: its last line that says so, else its last.
        telling = [l for l in tail if re.search(r"error|FAIL|MISMATCH|ABOVE|MISSING", l)
                   and not l.lstrip().startswith("help:")]
        result["seconds"] = round(time.monotonic() - start, 2)
        result["exit_code"] = code
        if code is None:
            result["status"] = "failed"
            result["reason"] = (f"stopped: the run was ended ({self.stopped})" if self.stopped
                                else f"timed out after {limit:.0f} s")
        elif code == 0:
            result["status"] = "passed"
        elif code == 77:
            result["status"] = "skipped"
            result["reason"] = tail[-1][:200] if tail else "skipped"
        else:
            result["status"] = "failed"
            said = (telling or tail)[-1][:200] if tail else ""
            result["reason"] = f"exit {code}: {said}" if said else f"exit {code}"
        return result

    def pack(self):
        """The work folder as OUT/work.tar.gz: every file up to
        ARCHIVE_FILE_BYTES (larger ones named in results.json), and only the
        logs if the whole would not come back."""
        target = os.path.join(self.out, "work.tar.gz")
        files, left_out = [], []
        for folder, _, names in os.walk(self.work):
            for n in sorted(names):
                path = os.path.join(folder, n)
                rel = os.path.relpath(path, self.work)
                size = os.path.getsize(path) if os.path.isfile(path) else -1
                if size < 0:
                    continue
                if size > ARCHIVE_FILE_BYTES:
                    left_out.append(f"{rel} ({size} bytes)")
                else:
                    files.append((rel, path))
        for attempt in (files, [f for f in files if f[0].startswith("logs")]):
            with tarfile.open(target + ".part", "w:gz") as tar:
                for rel, path in attempt:
                    tar.add(path, arcname=rel)
            if os.path.getsize(target + ".part") <= MAX_FILE_BYTES:
                break
            left_out = [f"{rel} (the archive would be over 16 MiB)"
                        for rel, _ in files if not rel.startswith("logs")] + left_out
        os.replace(target + ".part", target)
        self.report["left_out"] = left_out

    def write(self):
        self.report["seconds"] = round(self.elapsed(), 2)
        self.report["suites"] = suites_of(self.report["checks"])
        for name, text in (("results.json", json.dumps(self.report, indent=1)),
                           ("results.md", markdown(self.report))):
            path = os.path.join(self.out, name)
            with open(path + ".part", "w") as f:
                f.write(text)
            os.replace(path + ".part", path)


def suites_of(checks):
    """Each suite that has checks in the run, with its status."""
    order, entries = [], {}
    for c in checks:
        if c["suite"] not in entries:
            what = next(s.what for s in SUITES if s.name == c["suite"])
            entries[c["suite"]] = {"name": c["suite"], "what": what, "checks": []}
            order.append(c["suite"])
        entries[c["suite"]]["checks"].append(c)
    out = []
    for name in order:
        e = entries[name]
        states = {c["status"] for c in e["checks"]}
        e["status"] = ("failed" if "failed" in states else "running" if "running" in states
                       else "skipped" if states <= {"skipped"}
                       else "passed" if states <= {"passed", "skipped"} else "incomplete")
        reasons = {c.get("reason") for c in e["checks"] if c["status"] == e["status"]}
        if len(reasons) == 1 and None not in reasons:
            e["reason"] = reasons.pop()
        e["seconds"] = round(sum(c["seconds"] for c in e["checks"]), 2)
        e["limit_s"] = sum(c["limit_s"] for c in e["checks"])
        out.append({k: v for k, v in e.items() if k != "checks"}
                   | {"checks": [c["name"] for c in e["checks"]]})
    return out


def kit_info():
    try:
        return json.load(open(os.path.join(KIT, "KIT.json")))
    except (OSError, ValueError):
        return {}


def markdown(report):
    kit = report["kit"]
    deadline = report.get("deadline_s")
    lines = [f"# GPU kit results: {report['host']}, {report['started']}", "",
             f"kit: commit {kit.get('commit', '?')}, built {kit.get('built', '?')};"
             f" GPU visible: {'yes' if report['gpu'] else 'no'};"
             f" {report['seconds']:.0f} s so far of a plan whose limits add up to"
             f" {report['plan_limit_s']} s"
             + (f"; deadline {deadline:g} s" if deadline is not None else "")
             + ("; every launch synchronised (--sync)" if report.get("sync") else ""), "",
             "| suite | check | status | seconds | limit | figures |",
             "|---|---|---|---|---|---|"]
    for c in report["checks"]:
        figs = ", ".join(f"{k} {v['value']:g} {v['unit']}".rstrip(" -")
                         for k, v in c["figures"].items())
        status = c["status"] + (f": {c['reason']}" if c.get("reason") else "")
        lines.append(f"| {c['suite']} | {c['name']} | {status.replace('|', '/')} "
                     f"| {c['seconds']:.1f} | {c['limit_s']:g} | {figs} |")
    lines += ["", "| suite | status | seconds |", "|---|---|---|"]
    for s in report["suites"]:
        lines.append(f"| {s['name']} | {s['status']}"
                     + (f": {s['reason']}" if s.get("reason") else "")
                     + f" | {s['seconds']:.1f} |")
    if report.get("left_out"):
        lines += ["", "Not in work.tar.gz: " + "; ".join(report["left_out"])]
    return "\n".join(lines) + "\n"


def failed_in(path):
    """The checks of an earlier results.json that did not pass or skip."""
    report = json.load(open(path))
    return [f"{c['suite']}:{c['name']}" for c in report.get("checks", [])
            if c["status"] not in ("passed", "skipped")]


def parse(argv):
    out, names, deadline, sync, errors = None, [], None, False, []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("--deadline", "--failed-in") and i + 1 < len(argv):
            if a == "--deadline":
                try:
                    deadline = float(argv[i + 1])
                except ValueError:
                    deadline = -1
                if not 0 < deadline < 1e6:
                    errors.append(f"--deadline {argv[i + 1]}: give the seconds, e.g. 400")
            else:
                try:
                    names += failed_in(argv[i + 1])
                except (OSError, ValueError, KeyError) as e:
                    errors.append(f"--failed-in {argv[i + 1]}: {e}")
            i += 2
            continue
        if a == "--sync":
            sync = True
        elif a.startswith("-"):
            errors.append(f"unknown option {a}")
        elif out is None:
            out = a
        else:
            names.append(a)
        i += 1
    return out, names, deadline, sync, errors


def main(argv):
    if len(argv) >= 2 and argv[1] == "--check-libraries":
        return check_libraries()
    if len(argv) >= 3 and argv[1] == "--bench-figures":
        return bench_figures(argv[2])
    if len(argv) >= 2 and argv[1] == "--plans":
        for name, keys in PLANS.items():
            print(f"{name}: {len(keys)} checks, limits {plan_limit(keys)} s")
            for k in keys:
                print(f"  {k} {CHECKS[k].timeout} s")
        return 0
    out, names, deadline, sync, errors = parse(argv)
    if out is None:
        errors.append("no OUT folder given")
    keys, unknown = resolve(names or ["default"])
    if unknown:
        errors.append(f"no plan, suite or check {', '.join(unknown)}; plans: "
                      + ", ".join(PLANS) + "; suites: " + ", ".join(s.name for s in SUITES)
                      + " (run.sh --plans lists every check)")
    if errors:
        for e in errors:
            print("error: " + e, file=sys.stderr)
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    # Only an empty directory or an earlier run's: nothing else is overwritten.
    if os.path.isdir(out) and os.listdir(out) and not os.path.exists(
            os.path.join(out, "results.json")):
        print(f"error: {out} holds files of something else; give a new or empty"
              " directory", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    for stale in ("results.json", "results.md", "work.tar.gz"):
        if os.path.exists(os.path.join(out, stale)):
            os.remove(os.path.join(out, stale))
    runner = Runner(out, keys, deadline, sync)
    signal.signal(signal.SIGTERM, runner.stop)
    signal.signal(signal.SIGINT, runner.stop)
    return runner.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
