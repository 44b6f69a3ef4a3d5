#!/usr/bin/python3
"""Rewrites a merged hypipe checkpoint with the parameter names hypipe used
before it took Megatron's hybrid names (docs/model.md), as a checkpoint
written by an older hypipe has them: only the header changes, the data
section (and so its checksum) stays byte for byte.

usage: legacy_names.py IN OUT"""
import json
import re
import struct
import sys

RULES = [
    (r"(decoder\.layers\.\d+\.)mixer\.in_proj\.layer_norm_weight$", r"\1norm.weight"),
    (r"(decoder\.layers\.\d+\.mixer\.)conv1d_weight$", r"\1conv1d.weight"),
    (r"(decoder\.layers\.\d+\.mixer\.)conv1d_bias$", r"\1conv1d.bias"),
    (r"(decoder\.layers\.\d+\.mlp\.experts\.)(linear_fc[12])\.weight(\d+)$",
     r"\1local_experts.\3.\2.weight"),
]

raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
renamed = {}
count = 0
for name, entry in header.items():
    new = name
    for pattern, repl in RULES:
        new = re.sub(pattern, repl, new)
    count += new != name
    renamed[new] = entry
text = json.dumps(renamed, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
print("renamed %d of %d tensors" % (count, len(header)))
