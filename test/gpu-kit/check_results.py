#!/usr/bin/env python3
"""Checks a GPU kit results.json: well formed, every suite of the kit present
(or only those named) with its checks, and each suite's status as expected.

usage: check_results.py RESULTS.json STATUS[:REASON] [SUITE...]
STATUS is what every (named) suite must report; REASON, when given, must be
in each suite's reason."""
import json
import sys

SUITES = ["environment", "correctness", "bf16", "transports", "probes", "baselines",
          "bench"]


def main():
    path, expect = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or SUITES
    status, _, reason = expect.partition(":")
    report = json.load(open(path))
    errors = []
    for key in ("kit", "host", "started", "gpu", "seconds", "suites"):
        if key not in report:
            errors.append(f"no '{key}'")
    if "commit" not in report.get("kit", {}):
        errors.append("the kit's commit is not recorded")
    got = [s["name"] for s in report.get("suites", [])]
    if got != names:
        errors.append(f"suites {got}, expected {names}")
    for s in report.get("suites", []):
        for key in ("status", "seconds", "limit_s", "checks", "what"):
            if key not in s:
                errors.append(f"suite {s.get('name')}: no '{key}'")
        if s.get("status") != status:
            errors.append(f"suite {s['name']}: {s.get('status')}, expected {status}")
        if reason and reason not in s.get("reason", ""):
            errors.append(f"suite {s['name']}: reason {s.get('reason')!r} lacks {reason!r}")
        if status == "skipped" and not s.get("checks"):
            errors.append(f"suite {s['name']}: no checks listed")
        for c in s.get("checks", []):
            if c.get("status") not in ("passed", "failed", "skipped"):
                errors.append(f"{s['name']}/{c.get('name')}: status {c.get('status')}")
            if not isinstance(c.get("figures"), dict):
                errors.append(f"{s['name']}/{c.get('name')}: figures not a mapping")
    for e in errors:
        print("FAIL: " + e)
    if not errors:
        print(f"results.json: {len(got)} suites, each {expect}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
