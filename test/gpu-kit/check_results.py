#!/usr/bin/env python3
"""Checks a GPU kit run's OUT folder: at most 8 files, none deeper than two
folders (what one GPU call brings back), results.json well formed with the
suites named (in order) and each suite's status as expected, the plan's
limits summed right, and the archive of the work folder beside it.

usage: check_results.py OUT STATUS[:REASON] [SUITE...]
STATUS is what every (named) suite must report; REASON, when given, must be
in each suite's reason. Without SUITEs, the suites of the default plan."""
import json
import os
import sys
import tarfile

# The probes run in plan `all` since cuDNN's fused attention took their
# seconds (scripts/gpu-kit/run.py's DEFAULT_PLAN).
DEFAULT_SUITES = ["environment", "correctness", "bf16", "bench", "baselines", "transports"]


def check_files(out, errors):
    files = []
    for folder, _, names in os.walk(out):
        for n in names:
            rel = os.path.relpath(os.path.join(folder, n), out)
            files.append(rel)
            if rel.count(os.sep) > 2:
                errors.append(f"{rel} is deeper than two folders")
            if os.path.getsize(os.path.join(out, rel)) > 16 << 20:
                errors.append(f"{rel} is over 16 MiB")
    if len(files) > 8:
        errors.append(f"OUT holds {len(files)} files, over 8: {sorted(files)}")
    return files


def main():
    out, expect = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or DEFAULT_SUITES
    status, _, reason = expect.partition(":")
    errors = []
    files = check_files(out, errors)
    report = json.load(open(os.path.join(out, "results.json")))
    for key in ("kit", "host", "started", "gpu", "seconds", "suites", "checks",
                "plan_limit_s", "archive"):
        if key not in report:
            errors.append(f"no '{key}'")
    if "commit" not in report.get("kit", {}):
        errors.append("the kit's commit is not recorded")
    checks = report.get("checks", [])
    if report.get("plan_limit_s") != sum(c["limit_s"] for c in checks):
        errors.append(f"plan_limit_s {report.get('plan_limit_s')} is not the checks' sum")
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
        if not s.get("checks"):
            errors.append(f"suite {s['name']}: no checks listed")
    for c in checks:
        if c.get("status") not in ("passed", "failed", "skipped", "not started"):
            errors.append(f"{c.get('suite')}/{c.get('name')}: status {c.get('status')}")
        if not isinstance(c.get("figures"), dict):
            errors.append(f"{c.get('suite')}/{c.get('name')}: figures not a mapping")
    if "work.tar.gz" not in files:
        errors.append("no work.tar.gz beside the results")
    else:
        with tarfile.open(os.path.join(out, "work.tar.gz")) as tar:
            tar.getmembers()
    if "results.md" not in files:
        errors.append("no results.md")
    for e in errors:
        print("FAIL: " + e)
    if not errors:
        print(f"{out}: {len(files)} files; results.json: {len(got)} suites, each {expect}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
