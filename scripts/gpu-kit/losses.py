#!/usr/bin/env python3
"""Compares the losses of two hypipe-run --json-log files, step by step: a
reference (the CPU target) and a run to check (the GPU).

usage: losses.py REFERENCE.jsonl RUN.jsonl [--from-step N] [--first-rtol T]
                 [--rtol T]
Every step of RUN from N on must be in REFERENCE. The first compared step's
loss must agree within --first-rtol (before any update the two targets
differ only by rounding), every step's within --rtol (the GPU sums some
gradients with atomics, so long runs drift by a few 1e-4). Prints the worst
difference as figures; exit 1 when a tolerance is passed or a step is
missing."""
import argparse
import json
import sys


def losses(path):
    return {s["step"]: s["loss"] for s in map(json.loads, filter(str.strip, open(path)))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("reference")
    p.add_argument("run")
    p.add_argument("--from-step", type=int, default=1)
    p.add_argument("--first-rtol", type=float, default=None)
    p.add_argument("--rtol", type=float, required=True)
    a = p.parse_args()
    ref, run = losses(a.reference), losses(a.run)
    steps = sorted(s for s in run if s >= a.from_step)
    if not steps:
        print(f"error: {a.run} has no step from {a.from_step} on")
        return 1
    missing = [s for s in steps if s not in ref]
    if missing:
        print(f"error: the reference {a.reference} lacks steps {missing[:5]}")
        return 1
    diff = {s: abs(run[s] - ref[s]) / abs(ref[s]) for s in steps}
    worst = max(steps, key=diff.get)
    first, last = steps[0], steps[-1]
    print(f"steps {first}-{last}: loss {run[first]:.6f} -> {run[last]:.6f} "
          f"(reference {ref[first]:.6f} -> {ref[last]:.6f}); worst relative difference "
          f"{diff[worst]:.2e} at step {worst}")
    print(f"@figure first_loss_rel_diff {diff[first]:.3e} -")
    print(f"@figure final_loss {run[last]:.6f} -")
    print(f"@figure worst_loss_rel_diff {diff[worst]:.3e} -")
    ok = diff[worst] <= a.rtol and (a.first_rtol is None or diff[first] <= a.first_rtol)
    if not ok:
        print(f"ABOVE tolerance: first {diff[first]:.2e} (limit {a.first_rtol}), "
              f"worst {diff[worst]:.2e} (limit {a.rtol})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
