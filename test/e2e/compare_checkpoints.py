#!/usr/bin/python3
"""Compares two merged hypipe checkpoints (`hypipe ckpt merge` files): the
same tensor names, dtypes and shapes, and every tensor within TOL of the
other relative to its largest magnitude.

usage: compare_checkpoints.py A B TOL"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from torch_reference import load_safetensors  # noqa: E402

a, _ = load_safetensors(sys.argv[1])
b, _ = load_safetensors(sys.argv[2])
tol = float(sys.argv[3])
if sorted(a) != sorted(b):
    print("different tensors: only in A %s, only in B %s"
          % (sorted(set(a) - set(b))[:5], sorted(set(b) - set(a))[:5]))
    sys.exit(1)
worst, where = 0.0, ""
for name in sorted(a):
    x, y = a[name], b[name]
    if x.dtype != y.dtype or x.shape != y.shape:
        print("%s: %s %s vs %s %s" % (name, x.dtype, list(x.shape), y.dtype, list(y.shape)))
        sys.exit(1)
    scale = float(x.abs().max()) or 1.0
    d = float((x.double() - y.double()).abs().max()) / scale
    if d > worst:
        worst, where = d, name
print("%d tensors, max relative difference %.3g%s (%s %g)"
      % (len(a), worst, " in " + where if where else "",
         "within" if worst <= tol else "ABOVE", tol))
sys.exit(0 if worst <= tol else 1)
