#!/usr/bin/python3
"""Trains a fixed set of runs and compares every step's loss, gradient norm
and auxiliary loss bit for bit with values recorded by an earlier build.

usage: bit_identical.py BINDIR RECORDED.json WORKDIR [--record]
           [--compile-flags "FLAGS"] [--only NAME...]

The runs cover the bundled example, every schedule (pp 2; vpp 2 for the
interleaved and V-shaped ones; pp 4 for zb-h1), bf16, sequence packing, MTP,
MoE (dist.yaml has E layers), data parallelism and the distributed
optimizer. Every run pins OpenBLAS's Haswell kernels and one thread; hypipe's
own CPU kernels are built for the machine (-march=native), and their
vectorised reductions (`omp simd`) add in the order of its vector width, so
the values are recorded per vector ISA: RECORDED.json on machines with
AVX-512, RECORDED-avx2.json on those with AVX2 alone (the one a machine
reads and --record writes is named on the last line).

With --record the values are written to RECORDED.json (taken by running
main before a change that must not move a loss); without it, each run is
compared with them and any difference is printed with its run, step and key.

--compile-flags adds FLAGS to every run's `hypipe compile` and compares with
the same recorded values: what must not move a loss (activation recompute)
is tried on every run. When FLAGS ask for recompute, every run's manifest
must recompute a layer, so a recompute that silently does nothing fails.
"""
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INPUTS = os.path.join(HERE, "Inputs")
EXAMPLES = os.path.join(HERE, "..", "..", "examples")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
KEYS = ("loss", "grad_norm", "aux_loss")

DIST = os.path.join(INPUTS, "dist.yaml")
# (name, spec, compile flags, ranks, run flags)
RUNS = [
    ("bundled", os.path.join(EXAMPLES, "hybrid-tiny.yaml"), [], 2, ["--steps", "3"]),
    ("dist-pp1", DIST, [], 1, ["--steps", "3"]),
    ("dist-gpipe", DIST, ["--pp", "2", "--schedule", "gpipe"], 2, ["--steps", "3"]),
    ("dist-1f1b", DIST, ["--pp", "2", "--schedule", "1f1b"], 2, ["--steps", "3"]),
    ("dist-interleaved", DIST, ["--pp", "2", "--vpp", "2", "--schedule", "interleaved-1f1b"], 2, ["--steps", "3"]),
    ("dist-zb-h1", DIST, ["--pp", "4", "--schedule", "zb-h1"], 4, ["--steps", "3"]),
    ("dist-zbv", DIST, ["--pp", "2", "--vpp", "2", "--schedule", "zbv"], 2, ["--steps", "3"]),
    ("dist-dualpipev", DIST, ["--pp", "2", "--vpp", "2", "--schedule", "dualpipev"], 2, ["--steps", "3"]),
    ("dist-bf16-1f1b", DIST, ["--pp", "2", "--schedule", "1f1b", "--bf16"], 2, ["--steps", "3"]),
    ("dist-bf16-zbv", DIST, ["--pp", "2", "--vpp", "2", "--schedule", "zbv", "--bf16"], 2, ["--steps", "3"]),
    ("dist-dp2-distopt", DIST, ["--dp", "2", "--microbatches", "2", "--distributed-optimizer"], 2, ["--steps", "3"]),
    ("dist-pp2-dp2-bf16", DIST, ["--pp", "2", "--vpp", "2", "--dp", "2", "--microbatches", "2",
                                  "--schedule", "interleaved-1f1b", "--bf16", "--distributed-optimizer"], 4, ["--steps", "3"]),
    ("mtp", os.path.join(INPUTS, "ref-mtp.yaml"), [], 1, ["--steps", "3"]),
    ("mtp-pp2", os.path.join(INPUTS, "ref-mtp.yaml"), ["--pp", "2", "--schedule", "1f1b"], 2, ["--steps", "3"]),
    ("packed-pp1", "packed", [], 1, ["--steps", "3"]),
    ("packed-pp2-zb-h1", "packed", ["--pp", "2", "--schedule", "zb-h1"], 2, ["--steps", "3"]),
]


def packed_spec(work):
    """packed.yaml beside seeded JSONL samples (as packing.test writes them)."""
    spec = os.path.join(work, "packed.yaml")
    if not os.path.exists(spec):
        subprocess.run([sys.executable, os.path.join(HERE, "write_jsonl.py"),
                        os.path.join(work, "samples.jsonl"), "40", "3", "150", "1"],
                       check=True)
        text = open(os.path.join(INPUTS, "packed.yaml")).read()
        open(spec, "w").write(text.replace(
            "training:", "training:\n  calculate_per_token_loss: true", 1))
    return spec


def recomputed_layers(art):
    manifest = json.load(open(os.path.join(art, "manifest.json")))
    return sum(1 for s in manifest["stages"] for l in s["layers"]
               if l.get("recomputed") or "recompute" in l)


def isa_file(recorded):
    """RECORDED.json, or RECORDED-avx2.json on a CPU without AVX-512."""
    flags = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    if " avx512f" in flags:
        return recorded
    base, ext = os.path.splitext(recorded)
    return base + "-avx2" + ext


def run(bindir, work, extra, name, spec, flags, ranks, run_flags):
    if spec == "packed":
        spec = packed_spec(work)
    flags = flags + extra
    art = os.path.join(work, name)
    log = art + ".jsonl"
    env = dict(os.environ, OPENBLAS_CORETYPE="Haswell", OMP_NUM_THREADS="1")
    subprocess.run([os.path.join(bindir, "hypipe"), "compile", spec, "-o", art] + flags,
                   check=True, stdout=subprocess.DEVNULL, env=env)
    launch = MPIRUN + ["-np", str(ranks)] if ranks > 1 else []
    subprocess.run(launch + [os.path.join(bindir, "hypipe-run"), art, "-q", "--threads", "1",
                             "--json-log", log] + run_flags,
                   check=True, stdout=subprocess.DEVNULL, env=env)
    if any(f.startswith("--recompute") for f in extra) and not recomputed_layers(art):
        sys.exit("%s: compiled with %s, but no layer is recomputed" % (name, " ".join(extra)))
    steps = [json.loads(line) for line in open(log)]
    return [{k: s.get(k) for k in KEYS} for s in steps]


def main():
    args = sys.argv[1:]
    record = "--record" in args
    only = args[args.index("--only") + 1:] if "--only" in args else None
    extra = (shlex.split(args[args.index("--compile-flags") + 1])
             if "--compile-flags" in args else [])
    if record and extra:
        sys.exit("--record takes no --compile-flags: the values are those of the plain runs")
    bindir, recorded, work = args[0], isa_file(args[1]), args[2]
    os.makedirs(work, exist_ok=True)
    got = {r[0]: run(bindir, work, extra, *r) for r in RUNS if not only or r[0] in only}
    if record:
        with open(recorded, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
            f.write("\n")
        print("recorded %d runs in %s" % (len(got), os.path.basename(recorded)))
        return 0
    want = json.load(open(recorded))
    bad = 0
    for name, steps in got.items():
        if name not in want:
            print("%s: no recorded values" % name)
            bad += 1
            continue
        if len(steps) != len(want[name]):
            print("%s: %d steps, recorded %d" % (name, len(steps), len(want[name])))
            bad += 1
            continue
        for i, (a, b) in enumerate(zip(want[name], steps)):
            for k in KEYS:
                if a[k] != b[k]:
                    print("%s step %d %s: %r, recorded %r" % (name, i + 1, k, b[k], a[k]))
                    bad += 1
    print("%d runs, %d steps compared bit for bit: %s"
          % (len(got), sum(len(s) for s in got.values()),
             "identical" if not bad else "%d DIFFERENCES" % bad))
    print("(recorded values: %s)" % os.path.basename(recorded))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
