#!/usr/bin/python3
"""Checks a bf16 export against the float32 export of the same checkpoint:
every tensor BF16, and its bits PyTorch's rounding of the float32 value
(`.to(torch.bfloat16)`: nearest, ties to even), so hypipe's rounding is
checked against an independent implementation.

usage: check_bf16_export.py F32.safetensors BF16.safetensors"""
import json
import struct
import sys

import torch


def tensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


f32, b16 = tensors(sys.argv[1]), tensors(sys.argv[2])
if sorted(f32) != sorted(b16):
    sys.exit("FAIL: the exports name different tensors")
for name, (dtype, shape, raw) in b16.items():
    if dtype != "BF16" or f32[name][0] != "F32" or shape != f32[name][1]:
        sys.exit("FAIL: %s is %s %s" % (name, dtype, shape))
    want = torch.frombuffer(bytearray(f32[name][2]), dtype=torch.float32).to(torch.bfloat16)
    got = torch.frombuffer(bytearray(raw), dtype=torch.bfloat16)
    if not torch.equal(want.view(torch.int16), got.view(torch.int16)):
        bad = (want.view(torch.int16) != got.view(torch.int16)).nonzero()[0].item()
        sys.exit("FAIL: %s element %d: torch %r, hypipe %r" % (name, bad, want[bad].item(), got[bad].item()))
print("%d tensors BF16, every element torch's bfloat16 of the float32 export" % len(b16))
