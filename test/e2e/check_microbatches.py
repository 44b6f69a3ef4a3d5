#!/usr/bin/python3
"""Checks that a packed run's microbatch count changed from step to step and
stayed below the unpacked count.

usage: check_microbatches.py LOG.jsonl UNPACKED"""
import json
import sys

counts = [json.loads(l)["microbatches"] for l in open(sys.argv[1])]
unpacked = int(sys.argv[2])
ok = len(set(counts)) > 1 and max(counts) < unpacked
print("microbatches per step: %s; %s" % (
    counts, "fewer than %d and not all equal" % unpacked if ok else "NOT as expected"))
sys.exit(0 if ok else 1)
