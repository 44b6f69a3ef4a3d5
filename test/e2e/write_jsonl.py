#!/usr/bin/python3
"""Writes a JSON Lines file of variable-length samples for the packing tests.

usage: write_jsonl.py OUT COUNT MIN MAX SEED

Sample i has a seeded length in [MIN, MAX] and counts up from a seeded start
(mod 256); every third sample carries a loss_mask that masks out its first
half (a prompt), and every fifth is given as "text" instead of "tokens"."""
import json
import random
import sys

out, count, lo, hi, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
with open(out, "w") as f:
    for i in range(count):
        n = rng.randint(lo, hi) + 1  # tokens: n - 1 training positions
        start = rng.randrange(256)
        if i % 5 == 4:
            text = "".join(chr(97 + (start + k) % 26) for k in range(n))
            f.write(json.dumps({"text": text}) + "\n")
            continue
        sample = {"tokens": [(start + k) % 256 for k in range(n)]}
        if i % 3 == 2:
            sample["loss_mask"] = [0] * (n // 2) + [1] * (n - n // 2)
        f.write(json.dumps(sample) + "\n")
