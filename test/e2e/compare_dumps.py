#!/usr/bin/python3
"""Compares the gradients of two hypipe-run --dump-step files.

usage: compare_dumps.py A B TOL [FIGURE]
Every "grad.*" tensor of A must be in B, within TOL relative (Frobenius
norm of the difference over the norm of A's), and the losses too. With
FIGURE, the largest difference is also printed as the GPU kit's figure line
`@figure FIGURE VALUE -`."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from torch_reference import load_safetensors  # noqa: E402

a, meta_a = load_safetensors(sys.argv[1])
b, meta_b = load_safetensors(sys.argv[2])
tol = float(sys.argv[3])
worst, count = 0.0, 0
for name, ga in a.items():
    if not name.startswith("grad."):
        continue
    if name not in b:
        print("MISSING %s in %s" % (name, sys.argv[2]))
        sys.exit(1)
    err = (b[name].double() - ga.double()).norm().item() / max(ga.double().norm().item(), 1e-30)
    worst = max(worst, err)
    count += 1
la, lb = float(meta_a["loss"]), float(meta_b["loss"])
worst = max(worst, abs(la - lb) / abs(la))
ok = count > 0 and worst <= tol
print("%d gradients and the loss, max relative difference %.3g (%s %g)"
      % (count, worst, "within" if ok else "ABOVE", tol))
if len(sys.argv) > 4:
    print("@figure %s %.3e -" % (sys.argv[4], worst))
sys.exit(0 if ok else 1)
