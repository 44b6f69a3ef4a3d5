#!/usr/bin/env python3
"""GPU time by hypipe kernel class, from a kernel_times CSV.

Reads the CSV that libkernel_times.so writes (kind,name,start_ns,end_ns,
stream,grid,block), sums each activity's end - start into the classes of
`hypipe-run --profile` (runtime/kernels/cpu/Profile.h), prints a table
(class, ms, share of the summed time) and one `@figure class_<name>_ms X ms`
line per class, and lists the kernels that fell into `other`.

Every __global__ kernel of runtime/kernels/cuda/*.cu has a class below,
matched on its own identifier inside the hypipe namespace (demangled or
mangled names both work); library kernels are matched by name patterns
(cuBLAS/CUTLASS GEMMs, NCCL). `--check-sources DIR` fails when a kernel in
DIR/*.cu has no class here, or a class names a kernel DIR no longer has.

Usage: classify_kernels.py KERNEL_TIMES.csv [--skip-first-ns N] [--steps N]
                           [--gemm-flops F --peak-tflops P]
       classify_kernels.py --check-sources runtime/kernels/cuda
--skip-first-ns N leaves out activities that start within N ns of the
first one (warm-up steps). --steps N: the figures per step of an N-step run;
--gemm-flops F (GEMM FLOPs per step): the GEMM class's achieved TFLOP/s and
its share of --peak-tflops.
"""
import argparse
import csv
import glob
import os
import re
import sys

CLASSES = ["gemm", "scan", "conv", "attention", "norm", "elementwise",
           "moe_routing", "optimizer", "communication", "memcpy", "other"]

# runtime/kernels/cuda/*.cu, classed as the CPU target's ProfileScopes class
# the same work (runtime/kernels/cpu/*.cpp).
HYPIPE_KERNELS = {
    # Attention.cu (the CPU target counts RoPE as attention)
    "ropeKernel": "attention",
    "forwardKernel": "attention",
    "deltaKernel": "attention",
    "keyGradKernel": "attention",
    "queryGradKernel": "attention",
    # Device.cu: gradient norm and AdamW
    "sumSquaresKernel": "optimizer",
    "adamwKernel": "optimizer",
    # Head.cu: embedding, output softmax and cross-entropy
    "gatherKernel": "elementwise",
    "scatterAddKernel": "elementwise",
    "crossEntropyKernel": "elementwise",
    "sumTwoKernel": "elementwise",
    # the linear cross-entropy's (its GEMMs are cuBLAS's)
    "lossTargetsKernel": "elementwise",
    "crossEntropyChunkKernel": "elementwise",
    "rescaleSumsKernel": "elementwise",
    "lossCoefficientsKernel": "elementwise",
    "crossEntropyBackwardChunkKernel": "elementwise",
    # Mamba.cu: causal conv (with dt and SiLU), SSD scan, gated norm
    "convForwardKernel": "conv",
    "dtBackwardKernel": "conv",
    "siluBackwardKernel": "conv",
    "convInputGradKernel": "conv",
    "convWeightGradKernel": "conv",
    "chunkStateKernel": "scan",
    "statePassKernel": "scan",
    "chunkOutputKernel": "scan",
    "chunkStateGradKernel": "scan",
    "statePassBackwardKernel": "scan",
    "chunkBackwardKernel": "scan",
    "scanParamGradKernel": "scan",
    "gatedNormForwardKernel": "norm",
    "gatedNormBackwardKernel": "norm",
    # Moe.cu
    "routeKernel": "moe_routing",
    "gatherRowsKernel": "moe_routing",
    "slotRowKernel": "moe_routing",
    "combineKernel": "moe_routing",
    "rowGradKernel": "moe_routing",
    "scatterRowsKernel": "moe_routing",
    "routerGradKernel": "moe_routing",
    # Primitives.cu; columnDot is mostly norm weight gradients (also the
    # dt-bias and router-probability column sums)
    "rmsnormForwardKernel": "norm",
    "rmsnormBackwardKernel": "norm",
    "columnDotKernel": "norm",
    "activationForwardKernel": "elementwise",
    "activationBackwardKernel": "elementwise",
    "addKernel": "elementwise",
}

# Library kernels, first match wins.
LIBRARY_PATTERNS = [
    ("communication", re.compile(r"nccl", re.I)),
    ("gemm", re.compile(r"gemm|gemv|xmma|cutlass|nvjet|splitKreduce|cublas",
                        re.I)),
    ("attention", re.compile(r"fmha|flash_?attn|sdpa", re.I)),
]


def strip_template_args(text):
    """`f<a<b>>` -> `f`, when text ends in a balanced template list."""
    if not text.endswith(">"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ">":
            depth += 1
        elif text[i] == "<":
            depth -= 1
            if depth == 0:
                return text[:i]
    return text


def demangled_identifier(name):
    """The function's own identifier in a demangled name, and whether it is
    in the hypipe namespace."""
    text = name.replace("(anonymous namespace)", "")
    depth = 0
    for i, c in enumerate(text):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0:
            text = text[:i]
            break
    text = strip_template_args(text.strip())
    last = text.split("::")[-1].split()
    return (last[-1] if last else text), "hypipe::" in name


def mangled_identifier(name):
    """The function's own identifier in an Itanium-mangled name, and whether
    it is in the hypipe namespace: the source names of the (nested) name are
    length-prefixed, _ZN6hypipe2rt4cuda<anon>13forwardKernelILi64EE..."""
    i = 2
    while i < len(name) and name[i] in "NL":
        i += 1
    parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while j < len(name) and name[j].isdigit():
            j += 1
        length = int(name[i:j])
        parts.append(name[j:j + length])
        i = j + length
    if not parts:
        return name, False
    return parts[-1], parts[0] == "hypipe"


def classify(kind, name):
    if kind in ("memcpy", "memset"):
        return "memcpy"
    if name.startswith("_Z"):
        kernel, in_hypipe = mangled_identifier(name)
    else:
        kernel, in_hypipe = demangled_identifier(name)
    if in_hypipe and kernel in HYPIPE_KERNELS:
        return HYPIPE_KERNELS[kernel]
    for cls, pattern in LIBRARY_PATTERNS:
        if pattern.search(name):
            return cls
    return "other"


def check_sources(directory):
    """1 when the table and the kernels in directory/*.cu disagree."""
    found = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.cu"))):
        with open(path) as f:
            text = f.read()
        for m in re.finditer(r"__global__\s+void\s+(\w+)", text):
            found[m.group(1)] = os.path.basename(path)
    if not found:
        print("error: no __global__ kernels in %s/*.cu" % directory)
        return 1
    missing = sorted(k for k in found if k not in HYPIPE_KERNELS)
    stale = sorted(k for k in HYPIPE_KERNELS if k not in found)
    for k in missing:
        print("error: %s (%s) has no class in classify_kernels.py" %
              (k, found[k]))
    for k in stale:
        print("error: classify_kernels.py classes %s, which %s does not "
              "define" % (k, directory))
    if not missing and not stale:
        print("all %d kernels of %s have a class" % (len(found), directory))
    return 1 if missing or stale else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", help="kernel_times CSV")
    parser.add_argument("--skip-first-ns", type=int, default=0,
                        help="leave out activities starting within N ns of "
                        "the first")
    parser.add_argument("--steps", type=int, default=1,
                        help="training steps the CSV covers: figures per step")
    parser.add_argument("--gemm-flops", type=float, default=0.0,
                        help="GEMM FLOPs per step: the GEMM class's TFLOP/s")
    parser.add_argument("--peak-tflops", type=float, default=67.0,
                        help="the peak the GEMM rate is a share of (H100 fp32: 67)")
    parser.add_argument("--check-sources", metavar="DIR",
                        help="check the table against DIR/*.cu and exit")
    args = parser.parse_args()
    if args.check_sources:
        return check_sources(args.check_sources)
    if not args.csv:
        parser.error("give a kernel_times CSV (or --check-sources DIR)")

    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"kind", "name", "start_ns", "end_ns"}
    if rows and not need <= set(rows[0]):
        print("error: %s lacks columns %s" %
              (args.csv, ", ".join(sorted(need - set(rows[0])))))
        return 1
    activities = []
    for line, row in enumerate(rows, start=2):
        try:
            start, end = int(row["start_ns"]), int(row["end_ns"])
        except ValueError:
            print("error: %s:%d: start_ns/end_ns are not integers" %
                  (args.csv, line))
            return 1
        activities.append((row["kind"], row["name"], start, end))
    if not activities:
        print("error: %s has no activities" % args.csv)
        return 1

    first = min(a[2] for a in activities)
    kept = [a for a in activities if a[2] >= first + args.skip_first_ns]
    ns = {c: 0 for c in CLASSES}
    unmatched = {}
    for kind, name, start, end in kept:
        duration = max(0, end - start)
        cls = classify(kind, name)
        ns[cls] += duration
        if cls == "other":
            total, count = unmatched.get(name, (0, 0))
            unmatched[name] = (total + duration, count + 1)

    total = sum(ns.values())
    span = (max(a[3] for a in kept) - min(a[2] for a in kept)) if kept else 0
    print("%d of %d activities (skipping the first %d ns), %.3f ms of GPU "
          "time over a %.3f ms span" % (len(kept), len(activities),
                                        args.skip_first_ns, total / 1e6,
                                        span / 1e6))
    print("%-14s %12s %7s" % ("class", "ms", "share"))
    for c in CLASSES:
        share = 100.0 * ns[c] / total if total else 0.0
        print("%-14s %12.3f %6.1f%%" % (c, ns[c] / 1e6, share))
    print("%-14s %12.3f %6.1f%%" % ("total", total / 1e6, 100.0))
    if unmatched:
        print("other, by kernel:")
        for name, (t, count) in sorted(unmatched.items(),
                                       key=lambda kv: -kv[1][0]):
            print("  %12.3f ms %6d x  %s" % (t / 1e6, count, name))
    # Per step when the run's step count is given: the figures are then
    # comparable between runs of different lengths.
    per = max(1, args.steps)
    for c in CLASSES:
        print("@figure class_%s_ms %.6g ms" % (c, ns[c] / 1e6 / per))
    print("@figure class_total_ms %.6g ms" % (total / 1e6 / per))
    if args.gemm_flops and ns["gemm"]:
        tflops = args.gemm_flops * per / (ns["gemm"] / 1e9) / 1e12
        print("GEMM: %.3g TFLOP/s achieved, %.1f%% of %.0f TFLOP/s" %
              (tflops, 100 * tflops / args.peak_tflops, args.peak_tflops))
        print("@figure gemm_tflops %.4g TFLOP/s" % tflops)
        print("@figure gemm_share_of_peak %.3g %%" % (100 * tflops / args.peak_tflops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
