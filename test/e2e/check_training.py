#!/usr/bin/python3
"""Asserts a hypipe-run --json-log shows learning: the mean loss of the last
ten steps is below the byte-unigram entropy of the data (computed here, from
the file) by at least MARGIN nats, and below the first step's loss; the log's
first record holds that entropy.

usage: check_training.py LOG DATA MARGIN"""
import collections
import json
import math
import sys

log, data, margin = sys.argv[1], sys.argv[2], float(sys.argv[3])
steps = [json.loads(line) for line in open(log)]
raw = open(data, "rb").read()
counts = collections.Counter(raw)
entropy = -sum(c / len(raw) * math.log(c / len(raw)) for c in counts.values())
last = sum(s["loss"] for s in steps[-10:]) / min(10, len(steps))
print("steps %d, first loss %.4f, last-10 mean %.4f, unigram entropy %.4f"
      % (len(steps), steps[0]["loss"], last, entropy))
logged = steps[0].get("unigram_entropy")
if logged is None or abs(logged - entropy) > 1e-9 * entropy:
    print("FAIL: the log's first record says unigram_entropy %s" % logged)
    sys.exit(1)
ok = last < entropy - margin and last < steps[0]["loss"]
print("PASS" if ok else "FAIL: the model did not learn beyond byte frequencies")
sys.exit(0 if ok else 1)
