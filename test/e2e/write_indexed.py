#!/usr/bin/python3
"""Writes a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx) whose
token stream is a text file's bytes, one document per paragraph, with the
layout of Megatron's _IndexWriter: "MMIDIDX\\0\\0", version 1 (<Q), dtype code
(<B), sequence count (<Q), document count (<Q), sequence lengths (int32),
sequence byte pointers (int64), document boundaries (int64).

usage: write_indexed.py TEXT PREFIX [uint16|int32|uint8|float32] [BREAK]
BREAK: bad-magic, truncated-idx, truncated-bin, big-token, negative-token (int32:
a token -3), misaligned (the second document's pointer one byte off its tokens)"""
import struct
import sys

text, prefix = open(sys.argv[1], "rb").read(), sys.argv[2]
dtype = sys.argv[3] if len(sys.argv) > 3 else "uint16"
breakage = sys.argv[4] if len(sys.argv) > 4 else ""
code, fmt = {"uint8": (1, "B"), "int32": (4, "i"), "uint16": (8, "H"),
             "float32": (7, "f")}[dtype]
size = struct.calcsize(fmt)

docs = [p + b"\n\n" for p in text.split(b"\n\n")]
docs[-1] = docs[-1][:-2] if not text.endswith(b"\n\n") else docs[-1]
assert b"".join(docs) == text
tokens = list(text)
if breakage == "big-token":
    tokens[1000] = 300
if breakage == "negative-token":
    tokens[1000] = -3
lengths, pointers, at = [], [], 0
for d in docs:
    lengths.append(len(d))
    pointers.append(at)
    at += len(d) * size
with open(prefix + ".bin", "wb") as f:
    data = struct.pack("<%d%s" % (len(tokens), fmt), *tokens)
    f.write(data[: len(data) // 2] if breakage == "truncated-bin" else data)
idx = (b"MMIDIDX\x00\x00" if breakage != "bad-magic" else b"NOTANIDX\x00")
idx += struct.pack("<Q", 1) + struct.pack("<B", code)
idx += struct.pack("<Q", len(docs)) + struct.pack("<Q", len(docs) + 1)
idx += struct.pack("<%di" % len(docs), *lengths)
if breakage == "misaligned":
    pointers[1] += 1
idx += struct.pack("<%dq" % len(docs), *pointers)
idx += struct.pack("<%dq" % (len(docs) + 1), *range(len(docs) + 1))
with open(prefix + ".idx", "wb") as f:
    f.write(idx[:-5] if breakage == "truncated-idx" else idx)
print("wrote %s.bin/.idx: %d documents, %d tokens, %s" % (prefix, len(docs), len(tokens), dtype))
