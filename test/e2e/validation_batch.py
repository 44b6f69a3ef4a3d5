#!/usr/bin/python3
"""The validation batches of a hypipe run, rebuilt from the data itself:
the split of an indexed dataset's sequences as megatron-core's builder cuts
them (written out: normalised weights, cumulative bookends, Python's round),
and the samples as docs/data.md defines them (window of seq_length + 1 tokens
at offset splitmix64(splitmix64(seed) ^ i) mod (tokens - seq_length) in the
validation part's tokens; batch b holds samples [b G, (b + 1) G)). Writes
{"tokens", "labels", "loss"} for test/reference/torch_reference.py --batch:
the first EVAL_ITERS batches as microbatches of micro_batch_size rows, and
the validation loss hypipe logged at STEP (its first evaluation).

usage: validation_batch.py ARTIFACT PREFIX LOG STEP EVAL_ITERS OUT"""
import json
import struct
import sys

artifact, prefix, log, step, eval_iters, out = sys.argv[1:7]
step, eval_iters = int(step), int(eval_iters)
manifest = json.load(open(artifact + "/manifest.json"))
tr = manifest["training"]
seq, mbs, seed = tr["seq_length"], tr["micro_batch_size"], tr["seed"]
global_batch = manifest["parallel"]["dp"] * manifest["parallel"]["microbatches"] * mbs

# The index (docs/data.md): sequence lengths and pointers; the .bin's tokens.
idx = open(prefix + ".idx", "rb").read()
code = idx[17]
count = struct.unpack_from("<Q", idx, 18)[0]
lengths = struct.unpack_from("<%di" % count, idx, 34)
width, fmt = {1: (1, "B"), 8: (2, "H"), 4: (4, "i")}[code]
binary = open(prefix + ".bin", "rb").read()
stream = list(struct.unpack("<%d%s" % (len(binary) // width, fmt), binary))
starts = [0]
for n in lengths:
    starts.append(starts[-1] + n)

# megatron-core's split of the sequences, the validation part.
weights = [float(w) for w in manifest["data"]["split"].split(",")]
weights += [0.0] * (3 - len(weights))
weights = [w / sum(weights) for w in weights]
bookends = [0.0, weights[0], weights[0] + weights[1]]
first, last = (int(round(b * float(count))) for b in bookends[1:3])
part = stream[starts[first]:starts[last]]

MASK = (1 << 64) - 1


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


tokens, labels = [], []
for i in range(eval_iters * global_batch):
    at = splitmix64(splitmix64(seed) ^ i) % (len(part) - seq)
    tokens.append(part[at:at + seq])
    labels.append(part[at + 1:at + seq + 1])
rows = lambda t: [t[k:k + mbs] for k in range(0, len(t), mbs)]
record = [json.loads(l) for l in open(log) if json.loads(l)["step"] == step][0]
json.dump({"tokens": rows(tokens), "labels": rows(labels),
           "loss": record["validation_loss"]}, open(out, "w"))
print("validation batch: sequences [%d, %d) of %d, %d tokens, %d samples"
      % (first, last, count, len(part), len(tokens)))
