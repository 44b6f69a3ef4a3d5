#!/usr/bin/python3
"""A `hypipe train` run's peak tensor memory per pipeline rank (measured on
the device, summary.json's memory_mib[r].tensors) against the estimate from
the manifest (memory_mib[r].estimate, rt::rankTensorBytes): every rank within
TOL relative. With EXPLAIN (`hypipe explain SPEC --json` of the same spec
and options), its runtime_memory_bytes, the estimate from the spec alone
that `hypipe plan` uses, is held to the measured peak the same way.

usage: check_memory_estimate.py RUN_DIR TOL [EXPLAIN]"""
import json
import sys

summary = json.load(open(sys.argv[1] + "/summary.json"))
tol = float(sys.argv[2])
ranks = summary["memory_mib"]
explain = json.load(open(sys.argv[3]))["ranks"] if len(sys.argv) > 3 else None
worst, failures = 0.0, []
for r, entry in enumerate(ranks):
    measured = entry["tensors"]
    estimates = [("estimate", entry["estimate"])]
    if explain is not None:
        estimates.append(("explain's", explain[r]["runtime_memory_bytes"] / 2**20))
    for name, estimate in estimates:
        err = abs(estimate - measured) / measured
        worst = max(worst, err)
        if not err <= tol:
            failures.append("rank %d: measured %.2f MiB, %s %.2f MiB"
                            % (r, measured, name, estimate))
print("memory: %d ranks, max relative difference %.3g (%s %g)"
      % (len(ranks), worst, "within" if not failures else "ABOVE", tol))
for f in failures:
    print("MISMATCH " + f)
sys.exit(1 if failures else 0)
