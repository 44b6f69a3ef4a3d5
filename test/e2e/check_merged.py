#!/usr/bin/python3
"""Loads a `hypipe ckpt merge` file with PyTorch and checks it against the
artifact's manifest and the per-rank checkpoint files it came from.

usage: check_merged.py MERGED ARTIFACT STEP_DIR STEP"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from torch_reference import load_safetensors  # noqa: E402

import torch  # noqa: E402

merged, meta = load_safetensors(sys.argv[1])
manifest = json.load(open(os.path.join(sys.argv[2], "manifest.json")))
step_dir, step = sys.argv[3], int(sys.argv[4])
index = json.load(open(os.path.join(step_dir, "index.json")))

errors = []
if meta.get("format") != "hypipe-checkpoint" or int(meta.get("step", -1)) != step:
    errors.append("metadata %s does not say hypipe-checkpoint step %d" % (meta, step))
params = {}
for stage in manifest["stages"]:
    for p in stage["params"]:
        params[p["name"]] = p["shape"]
ranks = {}
for name, shape in params.items():
    for key in (name, "optimizer.exp_avg." + name, "optimizer.exp_avg_sq." + name):
        t = merged.get(key)
        if t is None:
            errors.append("missing " + key)
            continue
        if list(t.shape) != shape or t.dtype != torch.float32:
            errors.append("%s is %s %s, want float32 %s" % (key, t.dtype, list(t.shape), shape))
            continue
        f = index["weight_map"][key]
        if f not in ranks:
            ranks[f], _ = load_safetensors(os.path.join(step_dir, f))
        if not torch.equal(ranks[f][key], t):
            errors.append("%s differs from %s" % (key, f))
extra = set(merged) - set(params) - {"optimizer.exp_avg." + n for n in params} \
    - {"optimizer.exp_avg_sq." + n for n in params}
if extra:
    errors.append("unexpected tensors: %s" % sorted(extra))
# Adam's second moment is a mean of squares: never negative.
if any((merged["optimizer.exp_avg_sq." + n] < 0).any() for n in params):
    errors.append("negative exp_avg_sq")
print("%d parameters, %d tensors, %s" % (len(params), len(merged),
                                        "all match" if not errors else "; ".join(errors)))
sys.exit(1 if errors else 0)
