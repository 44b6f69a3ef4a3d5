#!/usr/bin/python3
"""Reads a --tensorboard-dir with TensorBoard's own reader and compares each
scalar with the --json-log value of the same step.

usage: check_tensorboard.py DIR LOG.jsonl

Every record of every event file is checked against its masked CRC-32C with
TensorBoard's own implementation, then EventAccumulator loads the directory;
each tag must hold one value per logged step, equal to the JSON log's value
rounded to float32 (TensorBoard's simple_value)."""
import glob
import json
import struct
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

# Megatron-LM's tags (hypipe's for tokens/s and memory) and the JSON log's keys.
TAGS = {"lm loss": "loss", "learning-rate": "lr", "grad-norm": "grad_norm",
        "tokens-per-second": "tokens_per_s",
        "mem-max-allocated-bytes": "peak_tensor_bytes"}

directory, log = sys.argv[1], sys.argv[2]
problems = []
files = glob.glob(directory + "/events.out.tfevents.*")
if not files:
    problems.append("no event file in " + directory)
for path in files:
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        record = data[at + 12:at + 12 + length]
        (record_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if length_crc != masked_crc32c(header) or record_crc != masked_crc32c(record):
            problems.append("%s: the record at byte %d fails its CRC" % (path, at))
        at += 16 + length

steps = [json.loads(line) for line in open(log)]
accumulator = EventAccumulator(directory, size_guidance={"scalars": 0})
accumulator.Reload()
tags = accumulator.Tags()["scalars"]
for tag, key in TAGS.items():
    if tag not in tags:
        problems.append("no tag '%s' (tags: %s)" % (tag, tags))
        continue
    events = accumulator.Scalars(tag)
    got = [(e.step, e.value) for e in events]
    want = [(s["step"], struct.unpack("f", struct.pack("f", s[key]))[0]) for s in steps]
    if got != want:
        problems.append("%s: TensorBoard %s, JSON log %s" % (tag, got, want))
for p in problems:
    print(p)
print("%d tags, %d steps each, %s" % (
    len(TAGS), len(steps),
    "equal to the JSON log" if not problems else "DIFFERENT"))
sys.exit(1 if problems else 0)
