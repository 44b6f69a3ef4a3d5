#!/usr/bin/python3
"""Writes an edited copy of a manifest, as a hostile or careless user would.

usage: edit_manifest.py IN OUT EDIT
EDIT: PATH=VALUE, a dotted path of keys and list indices
(`training.seq_length`, `stages.0.num_params`) and a JSON value (`8`,
`1e30`), or
`overflow` (a parameter shape whose element count wraps 64 bits), `drop`
(rank 0 loses its last action), `extra` (rank 0 runs its first action
twice)."""
import json
import sys

src, dst, edit = sys.argv[1:4]
m = json.load(open(src))
if "=" in edit:
    path, value = edit.split("=")
    *parents, key = path.split(".")
    target = m
    for parent in parents:
        target = target[int(parent) if isinstance(target, list) else parent]
    target[key] = json.loads(value)
elif edit == "overflow":
    m["stages"][0]["params"][0]["shape"] = [2**32, 2**32]
elif edit == "drop":
    m["programs"][0]["actions"].pop()
elif edit == "extra":
    actions = m["programs"][0]["actions"]
    actions.insert(0, dict(actions[0]))
else:
    sys.exit("unknown edit " + edit)
json.dump(m, open(dst, "w"))
