#!/usr/bin/python3
"""Checks the recompute `hypipe plan --json` chose for each candidate.

usage: check-plan-recompute.py HYPIPE PLAN.json

Prints the fit_by_recompute and simulated counts, then one line per
candidate, sorted: `full uniform` with whether num_layers is the most
layers any stage of its written spec holds (explain's stages), or `full
block` with whether it is fewer, and whether its Megatron-LM flags say so;
or `selective` with its modules and whether the flags carry them. The
expected lines are the test's, not these.
"""
import json
import subprocess
import sys

hypipe, path = sys.argv[1], sys.argv[2]
plan = json.load(open(path))
print(plan["fit_by_recompute"], plan["simulated"])
lines = []
for c in plan["candidates"]:
    r = c["recompute"]
    args = c["megatron_args"] or ""
    if r["granularity"] == "full":
        explain = json.loads(subprocess.run([hypipe, "explain", c["spec"], "--json"], check=True,
                                            capture_output=True, text=True).stdout)
        most = max(len(s["layers"]) for s in explain["stages"])
        flags = ("--recompute-granularity full --recompute-method %s "
                 "--recompute-num-layers %d" % (r["method"], r["num_layers"]))
        fits = r["num_layers"] == most if r["method"] == "uniform" else r["num_layers"] < most
        lines.append("full %s %s %s" % (r["method"], fits, flags in args))
    else:
        flags = "--recompute-granularity selective --recompute-modules " + " ".join(r["modules"])
        lines.append("%s %s %s" % (r["granularity"], "+".join(r["modules"]), flags in args))
for line in sorted(lines):
    print(line)
