#!/usr/bin/python3
"""Sequence-length sweep (bench/run_seq_sweep.sh): the same model and the
same tokens per step at sequence lengths 256 ... 4096 (micro-batch size
tokens / length), trained by hypipe-run --profile; prints hypipe's time per
token by kernel class as a table and writes it as an SVG line plot.

usage: seq_sweep.py HYPIPE_BIN_DIR SPEC TOKENS STEPS THREADS OUT_SVG LENGTH..."""
import json
import os
import re
import subprocess
import sys
import tempfile

bindir, spec, tokens, steps, threads, svg = sys.argv[1:7]
lengths = [int(x) for x in sys.argv[7:]]
tokens, steps = int(tokens), int(steps)
text = open(spec).read()
spec_dir = os.path.dirname(os.path.abspath(spec))
# The classes that scale with the sequence (attention) and those that must
# not (the Mamba scan and conv, the GEMMs of every layer).
classes = ["GEMM", "scan", "conv", "attention", "norm", "elementwise", "MoE routing", "optimizer"]
rows = []
tmp = tempfile.mkdtemp()
for S in lengths:
    mb = tokens // S
    body = re.sub(r"seq_length: \d+", "seq_length: %d" % S, text)
    body = re.sub(r"micro_batch_size: \d+", "micro_batch_size: %d" % mb, body)
    body = re.sub(r"path: (\S+)", lambda m: "path: " + os.path.join(spec_dir, m.group(1)), body)
    path = os.path.join(tmp, "seq%d.yaml" % S)
    open(path, "w").write(body)
    art = os.path.join(tmp, "seq%d.hpa" % S)
    subprocess.run([os.path.join(bindir, "hypipe"), "compile", path, "-o", art], check=True,
                   stdout=subprocess.DEVNULL)
    out = subprocess.run([os.path.join(bindir, "hypipe-run"), art, "--steps", str(steps + 1),
                          "--threads", threads, "--profile", "-q", "--json-log", art + "/log.jsonl"],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS=threads)).stdout
    logs = [json.loads(l) for l in open(art + "/log.jsonl")]
    per_class = {}
    for line in out.splitlines():
        m = re.match(r"(\S.*?)\s{2,}([0-9.]+)s\s+([0-9.]+)%", line)
        if m:
            per_class[m.group(1)] = float(m.group(2))
    total = per_class.pop(next(k for k in per_class if k.endswith("steps")))
    n = (steps + 1) * tokens  # the profile covers every step, warm-up included
    rows.append((S, mb, tokens * len(logs[1:]) / sum(r["tokens"] / r["tokens_per_s"] for r in logs[1:]),
                 {c: 1e6 * per_class.get(c, 0.0) / n for c in classes}, 1e6 * total / n))

print("%-7s %4s %9s  %s %9s" % ("seq", "mb", "tok/s", " ".join("%11s" % c for c in classes), "total"))
print("%-7s %4s %9s  %s %9s" % ("", "", "", " ".join("%11s" % "us/token" for _ in classes), "us/token"))
for S, mb, tps, per, total in rows:
    print("%-7d %4d %9.0f  %s %9.1f" % (S, mb, tps, " ".join("%11.2f" % per[c] for c in classes), total))

# The plot: microseconds per token against the sequence length (log2 axis).
W, H, L, R, T, B = 640, 400, 60, 150, 30, 50
series = [("total", "#000000"), ("GEMM", "#1f77b4"), ("attention", "#d62728"),
          ("scan", "#2ca02c"), ("conv", "#9467bd"), ("norm", "#8c564b")]
ymax = max(r[4] for r in rows) * 1.1
xs = {S: L + (W - L - R) * i / max(1, len(rows) - 1) for i, (S, *_r) in enumerate(rows)}


def y(v):
    return T + (H - T - B) * (1 - v / ymax)


parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18">hypipe-run, %d tokens per step, %s thread(s): microseconds per token</text>' % (L, tokens, threads),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, H - B, W - R, H - B),
         '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, T, L, H - B)]
for S, x in xs.items():
    parts.append('<text x="%.0f" y="%d" text-anchor="middle">%d</text>' % (x, H - B + 16, S))
parts.append('<text x="%d" y="%d" text-anchor="middle">sequence length</text>' % ((L + W - R) // 2, H - 12))
for i in range(5):
    v = ymax * i / 4
    parts.append('<text x="%d" y="%.0f" text-anchor="end">%.0f</text>' % (L - 6, y(v) + 4, v))
    parts.append('<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="#ddd"/>' % (L, y(v), W - R, y(v)))
for k, (name, color) in enumerate(series):
    pts = " ".join("%.1f,%.1f" % (xs[r[0]], y(r[4] if name == "total" else r[3][name])) for r in rows)
    parts.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>' % (pts, color))
    parts.append('<text x="%d" y="%d" fill="%s">%s</text>' % (W - R + 10, T + 16 * (k + 1), color, name))
parts.append("</svg>")
open(svg, "w").write("\n".join(parts) + "\n")
print("plot: %s" % svg)
