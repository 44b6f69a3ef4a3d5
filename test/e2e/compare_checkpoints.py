#!/usr/bin/python3
"""Compares two merged hypipe checkpoints (`hypipe ckpt merge` files): the
same tensor names, dtypes and shapes, and every tensor within TOL of the
other relative to its largest magnitude.

With `params`, only parameters count (optimizer.* tensors are left out of
both: an imported checkpoint has none).

usage: compare_checkpoints.py A B TOL [params]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from torch_reference import load_safetensors  # noqa: E402

a, _ = load_safetensors(sys.argv[1])
b, _ = load_safetensors(sys.argv[2])
tol = float(sys.argv[3])
if len(sys.argv) > 4 and sys.argv[4] == "params":
    a = {k: v for k, v in a.items() if not k.startswith("optimizer.")}
    b = {k: v for k, v in b.items() if not k.startswith("optimizer.")}
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
