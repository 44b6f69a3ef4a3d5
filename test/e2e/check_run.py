#!/usr/bin/python3
"""Checks what `hypipe train` leaves in its run directory.

usage: check_run.py RUN_DIR STEPS"""
import json
import os
import sys
import xml.etree.ElementTree as ET

run, steps = sys.argv[1], int(sys.argv[2])
errors = []
log = [json.loads(l) for l in open(os.path.join(run, "log.jsonl"))]
if [r["step"] for r in log] != list(range(1, steps + 1)):
    errors.append("log.jsonl does not hold steps 1..%d" % steps)
summary = json.load(open(os.path.join(run, "summary.json")))
if summary["steps"] != steps or summary["last_loss"] != log[-1]["loss"]:
    errors.append("summary.json disagrees with the log")
if not summary["last_loss"] < summary["first_loss"] - 0.5:
    errors.append("loss did not go down: %s" % summary)
for key in ("measured", "predicted"):
    b = summary["bubble"][key]
    if len(b) != summary["layout"]["pp"] or not all(0 <= x < 1 for x in b):
        errors.append("bubble %s %s is not a fraction per rank" % (key, b))
svg = ET.parse(os.path.join(run, "loss.svg")).getroot()
lines = [e for e in svg.iter() if e.tag.endswith("polyline")]
if len(lines) != 1 or len(lines[0].get("points").split()) != steps:
    errors.append("loss.svg has no polyline of %d points" % steps)
for name in ("trace.json", "trace.sim.json"):
    events = [e for e in json.load(open(os.path.join(run, name)))["traceEvents"]
              if e.get("ph") == "X"]
    if not events:
        errors.append(name + " has no events")
latest = open(os.path.join(run, "ckpt", "latest")).read().strip()
if latest != "step_%08d" % steps:
    errors.append("latest checkpoint is %s" % latest)
print("FAIL: " + "; ".join(errors) if errors else "PASS")
