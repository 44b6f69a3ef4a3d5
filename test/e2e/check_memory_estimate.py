#!/usr/bin/python3
"""A `hypipe train` run's peak tensor memory per pipeline rank (measured on
the device, summary.json's memory_mib[r].tensors) against the estimate from
the manifest (memory_mib[r].estimate, rt::rankTensorBytes): every rank within
TOL relative.

usage: check_memory_estimate.py RUN_DIR TOL"""
import json
import sys

summary = json.load(open(sys.argv[1] + "/summary.json"))
tol = float(sys.argv[2])
ranks = summary["memory_mib"]
worst, failures = 0.0, []
for r, entry in enumerate(ranks):
    measured, estimate = entry["tensors"], entry["estimate"]
    err = abs(estimate - measured) / measured
    worst = max(worst, err)
    if not err <= tol:
        failures.append("rank %d: measured %.2f MiB, estimate %.2f MiB" % (r, measured, estimate))
print("memory: %d ranks, max relative difference %.3g (%s %g)"
      % (len(ranks), worst, "within" if not failures else "ABOVE", tol))
for f in failures:
    print("MISMATCH " + f)
sys.exit(1 if failures else 0)
