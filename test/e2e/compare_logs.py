#!/usr/bin/python3
"""Compares the losses of two hypipe-run --json-log files.

usage: compare_logs.py A B same|different
       compare_logs.py A B within TOL   (loss, grad_norm, any MTP depth's
                                         loss and a nonzero aux_loss, relative)
       compare_logs.py A B validation TOL (the evaluations' steps, and their
                                         validation losses within TOL)
       compare_logs.py A B tail N [TOL] (B's last N steps equal A's: bit for bit
                                         with their lr, or loss and grad_norm
                                         within TOL)
       compare_logs.py A B tail N TOL loss (the losses alone within TOL)"""
import json
import sys

a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
mode = sys.argv[3]
if mode == "within":
    tol = float(sys.argv[4])
    if len(a) != len(b) or not a:
        print("step counts differ: %d vs %d" % (len(a), len(b)))
        sys.exit(1)
    worst = 0.0
    for x, y in zip(a, b):
        # With MTP depths, each depth's loss too.
        mtp = sorted(k for k in x if k.startswith("mtp_") and k.endswith("_loss"))
        if any(k not in y for k in mtp):
            print("step %d: B logs no %s" % (x["step"], ", ".join(mtp)))
            sys.exit(1)
        # With MoE layers, the load-balancing loss too.
        aux = ["aux_loss"] if x.get("aux_loss") else []
        if any(k not in y for k in aux):
            print("step %d: B logs no aux_loss" % x["step"])
            sys.exit(1)
        for key in ["loss", "grad_norm"] + mtp + aux:
            worst = max(worst, abs(x[key] - y[key]) / abs(x[key]))
    print("%d steps, max relative difference %.3g (%s %g)"
          % (len(a), worst, "within" if worst <= tol else "ABOVE", tol))
    sys.exit(0 if worst <= tol else 1)
if mode == "validation":
    # The validation losses (and their steps) within TOL, relative.
    tol = float(sys.argv[4])
    va = [(r["step"], r["validation_loss"]) for r in a if "validation_loss" in r]
    vb = [(r["step"], r["validation_loss"]) for r in b if "validation_loss" in r]
    same = bool(va) and [s for s, _ in va] == [s for s, _ in vb] and all(
        abs(x - y) <= tol * abs(x) for (_, x), (_, y) in zip(va, vb))
    print("%d evaluations, validation losses %s %g: %s vs %s"
          % (len(va), "within" if same else "NOT within", tol, va, vb))
    sys.exit(0 if same else 1)
if mode == "tail":
    n = int(sys.argv[4])
    want = [(r["step"], r["loss"], r["grad_norm"], r["lr"]) for r in a[-n:]]
    got = [(r["step"], r["loss"], r["grad_norm"], r["lr"]) for r in b[-n:]]
    if len(sys.argv) > 5:
        tol = float(sys.argv[5])
        loss_only = len(sys.argv) > 6 and sys.argv[6] == "loss"
        same = len(a) >= n and len(b) >= n and all(
            x[0] == y[0] and abs(x[1] - y[1]) <= tol * abs(x[1])
            and (loss_only or abs(x[2] - y[2]) <= tol * abs(x[2]))
            for x, y in zip(want, got))
        print("last %d steps%s %s %g" % (n, "' losses" if loss_only else "",
                                         "within" if same else "NOT within", tol))
        sys.exit(0 if same else 1)
    same = len(a) >= n and want == got
    print("last %d steps %s: %s vs %s" % (n, "identical" if same else "differ", want, got))
    sys.exit(0 if same else 1)
la = [r["loss"] for r in a]
lb = [r["loss"] for r in b]
same = la == lb
print("losses %s: %s vs %s" % ("identical" if same else "differ", la, lb))
sys.exit(0 if same == (mode == "same") else 1)
