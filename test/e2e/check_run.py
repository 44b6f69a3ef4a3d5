#!/usr/bin/python3
"""Checks what `hypipe train` leaves in its run directory; with RESUMED
(checkpoint steps), that the run resumed from each of them: the log says so
on the step after, and loss.svg marks them. loss.svg's axes are read from
its ticks (a label per tick group) in each panel, so values are checked,
not pixels: the entropy and the resumes in the loss panel, each step's
learning rate in the learning-rate panel.

usage: check_run.py RUN_DIR STEPS [RESUMED...]"""
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

run, steps = sys.argv[1], int(sys.argv[2])
resumed = [int(a) for a in sys.argv[3:]]
errors = []
log = [json.loads(l) for l in open(os.path.join(run, "log.jsonl"))]
if [r["step"] for r in log] != list(range(1, steps + 1)):
    errors.append("log.jsonl does not hold steps 1..%d" % steps)
if [r["step"] - 1 for r in log if r.get("resumed")] != resumed:
    errors.append("log.jsonl marks resumes after steps %s, not %s" % (
        [r["step"] - 1 for r in log if r.get("resumed")], resumed))
entropy = log[0].get("unigram_entropy")
if entropy is None:
    errors.append("the log's first record has no unigram_entropy")
summary = json.load(open(os.path.join(run, "summary.json")))
if summary["steps"] != steps or summary["last_loss"] != log[-1]["loss"]:
    errors.append("summary.json disagrees with the log")
if not summary["last_loss"] < summary["first_loss"] - 0.5:
    errors.append("loss did not go down: %s" % summary)
for key in ("measured", "predicted"):
    b = summary["bubble"][key]
    if len(b) != summary["layout"]["pp"] or not all(0 <= x < 1 for x in b):
        errors.append("bubble %s %s is not a fraction per rank" % (key, b))
if summary.get("unigram_entropy") != entropy:
    errors.append("summary.json's unigram_entropy is not the log's")


def value_at(svg, axis):
    """The value at a pixel on `axis` ("x" or "y"), from its first and
    last tick."""
    ticks = []
    for g in svg.iter():
        if g.tag.endswith("g") and g.get("class") == axis + "tick":
            x, y = map(float, re.findall(r"[-0-9.]+", g.get("transform")))
            text = [t for t in g if t.tag.endswith("text")][0].text
            ticks.append((x if axis == "x" else y, float(text)))
    (p0, v0), (p1, v1) = ticks[0], ticks[-1]
    return lambda p: v0 + (p - p0) * (v1 - v0) / (p1 - p0)


def panel(svg, name):
    """The group of loss.svg's panel `name`."""
    return [g for g in svg.iter() if g.get("class") == "panel-" + name][0]


def polyline(group, cls):
    """The points of the polyline of class `cls` in `group`."""
    lines = [e for e in group.iter() if e.tag.endswith("polyline")
             and e.get("class") == cls]
    if len(lines) != 1:
        return []
    return [tuple(map(float, p.split(","))) for p in lines[0].get("points").split()]


svg = ET.parse(os.path.join(run, "loss.svg")).getroot()
loss_panel = panel(svg, "loss")
if len(polyline(loss_panel, "loss")) != steps:
    errors.append("loss.svg has no loss polyline of %d points" % steps)
step_at, loss_at = value_at(loss_panel, "x"), value_at(loss_panel, "y")
lr_panel = panel(svg, "lr")
lr_at = value_at(lr_panel, "y")
pixel = abs(lr_at(1) - lr_at(0))
drawn = [lr_at(y) for x, y in polyline(lr_panel, "lr")]
if len(drawn) != steps or any(abs(d - r["lr"]) > pixel for d, r in zip(drawn, log)):
    errors.append("loss.svg's learning rates %s are not the log's" % drawn[:5])
marks = [e for e in svg.iter() if e.tag.endswith("line")]
at = [loss_at(float(e.get("y1"))) for e in marks if e.get("class") == "entropy"]
if entropy is not None and (len(at) != 1 or abs(at[0] - entropy) > 0.01):
    errors.append("loss.svg's entropy line is at %s, not %s" % (at, entropy))
at = [step_at(float(e.get("x1"))) for e in marks if e.get("class") == "resume"]
if len(at) != len(resumed) or any(abs(a - r) > 0.5 for a, r in zip(at, resumed)):
    errors.append("loss.svg marks resumes at steps %s, not %s" % (at, resumed))
for name in ("trace.json", "trace.sim.json"):
    events = [e for e in json.load(open(os.path.join(run, name)))["traceEvents"]
              if e.get("ph") == "X"]
    if not events:
        errors.append(name + " has no events")
latest = open(os.path.join(run, "ckpt", "latest")).read().strip()
if latest != "step_%08d" % steps:
    errors.append("latest checkpoint is %s" % latest)
print("FAIL: " + "; ".join(errors) if errors else "PASS")
