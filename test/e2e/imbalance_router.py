#!/usr/bin/python3
"""Makes the first MoE layer's routing imbalanced by construction, for
expert-parallel tests: one expert takes most tokens, one takes the rest,
and the others none (with top-1; top-2's second choices spread over the
others). The layer must be layer 0 (its input the embedding alone).

Channel 0 of every embedding row is set to 1 and channel 1 to +1 for a space
byte and -1 for any other; the router's row 0 reads channel 0 (every token
leans to expert 0), row 1 reads channel 1 (spaces go to expert 1), row 3 is
pushed away along channel 0. The top-1 shares are then computed in float64
from the edited weights over the data file's bytes (the text format's
tokens) and printed, and the script fails unless expert 0 takes over half
of them and experts 2 and 3 none. Plain Python: a merged checkpoint is a
safetensors file of F32 tensors (the data checksum goes, as the data
changed).

usage: imbalance_router.py IN.safetensors OUT.safetensors DATA.txt"""
import json
import math
import struct
import sys

src, dst, data = sys.argv[1:4]
with open(src, "rb") as f:
    raw = bytearray(f.read())
(length,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8 : 8 + length])
header.get("__metadata__", {}).pop("checksum", None)
base = 8 + length


def tensor(name):
    """The rows of F32 tensor `name` (a list of lists) and a writer."""
    entry = header[name]
    assert entry["dtype"] == "F32", entry["dtype"]
    lo, hi = entry["data_offsets"]
    flat = list(struct.unpack("<%df" % ((hi - lo) // 4), raw[base + lo : base + hi]))
    cols = entry["shape"][-1]
    rows = [flat[i : i + cols] for i in range(0, len(flat), cols)]

    def write():
        raw[base + lo : base + hi] = struct.pack("<%df" % len(flat), *sum(rows, []))

    return rows, write


emb, write_emb = tensor("embedding.word_embeddings.weight")
router, write_router = tensor("decoder.layers.0.mlp.router.weight")
(norm,), _ = tensor("decoder.layers.0.pre_mlp_layernorm.weight")
for v, row in enumerate(emb):
    row[0] = 1.0
    row[1] = 1.0 if v == ord(" ") else -1.0
router[0][0] = 0.2
router[1][1] = 1.0
router[3][0] = -1.0
write_emb()
write_router()
text = json.dumps(header).encode()
with open(dst, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + raw[base:])


def top1(v):
    """Layer 0's top-1 expert for token v, in float64 (RMSNorm, eps 1e-5)."""
    x = emb[v]
    rstd = 1.0 / math.sqrt(sum(a * a for a in x) / len(x) + 1e-5)
    xn = [a * rstd * g for a, g in zip(x, norm)]
    logits = [sum(w * a for w, a in zip(r, xn)) for r in router]
    return max(range(len(logits)), key=lambda e: logits[e])


tokens = open(data, "rb").read()
choice = {v: top1(v) for v in set(tokens)}
counts = [0] * len(router)
for v in tokens:
    counts[choice[v]] += 1
shares = [c / len(tokens) for c in counts]
print("top-1 shares: " + " ".join("%.3f" % s for s in shares))
if not (shares[0] > 0.5 and shares[1] > 0 and shares[2] == 0 and shares[3] == 0):
    print("the routing is not imbalanced as the test needs")
    sys.exit(1)
