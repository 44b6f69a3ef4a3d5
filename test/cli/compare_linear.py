#!/usr/bin/python3
"""Compares hypipe explain --json of a spec with the native and the linear
cross-entropy: the last stage's memory (the cost model's and the runtime
buffers') below the native one's, every other rank's the same, and the step
(the simulation's makespan) longer by the gradient passes' extra GEMMs.

usage: compare_linear.py NATIVE.json LINEAR.json"""
import json
import sys

native, linear = (json.load(open(f)) for f in sys.argv[1:3])
keys = ("memory_bytes", "runtime_memory_bytes")
last = [tuple(r[k] for k in keys) for r in (native["ranks"][-1], linear["ranks"][-1])]
below = all(l < n for n, l in zip(*last))
print("last stage's memory: %s (%s)" % (
    "linear below native" if below else "NOT BELOW", last))
first = [tuple(r[k] for k in keys) for r in (native["ranks"][0], linear["ranks"][0])]
print("first stage's memory: %s (%s)" % (
    "the same" if first[0] == first[1] else "DIFFERENT", first))
steps = native["simulation"]["makespan"], linear["simulation"]["makespan"]
longer = steps[1] > steps[0]
print("step time: %s (%s)" % ("linear above native" if longer else "NOT ABOVE", steps))
sys.exit(0 if below and first[0] == first[1] and longer else 1)
