"""Writes a measured-costs file as `hypipe train --costs-out` writes it, with
the edits argv[2:] (PATH=JSON, a dotted path) that make it hostile."""
import json
import sys


def passes(seconds, flops):
    return {p: {"seconds": seconds, "flops": flops}
            for p in ("forward", "backward_input", "backward_weight")}


costs = {"hypipe_costs": 1, "target": "cpu", "threads": 1,
         "tokens_per_microbatch": 128, "dtype": "fp32",
         "kinds": {k: passes(1e-3, 1e6) for k in
                   ("embedding", "mamba", "attention", "mlp", "moe", "head")}}
for edit in sys.argv[2:]:
    path, value = edit.split("=", 1)
    *parents, last = path.split(".")
    node = costs
    for key in parents:
        node = node[key]
    node[last] = json.loads(value)
with open(sys.argv[1], "w") as out:
    json.dump(costs, out)
