#!/usr/bin/python3
"""Writes a copy of a safetensors file (a merged hypipe checkpoint) with
every element of one F32 tensor set to VALUE (`nan`, `inf`, a number), as
a diverged run or a bad conversion leaves it. The data checksum goes (the
data changed), so the file reads as one written elsewhere.

usage: poison_tensor.py IN OUT NAME VALUE"""
import json
import struct
import sys

src, dst, name, value = sys.argv[1:5]
with open(src, "rb") as f:
    raw = bytearray(f.read())
(length,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8 : 8 + length])
header.get("__metadata__", {}).pop("checksum", None)
entry = header[name]
assert entry["dtype"] == "F32", entry["dtype"]
lo, hi = entry["data_offsets"]
base = 8 + length
raw[base + lo : base + hi] = struct.pack("<f", float(value)) * ((hi - lo) // 4)
text = json.dumps(header).encode()
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + raw[base:])
