"""Checks `hypipe plan --out DIR --json` against `hypipe explain --json` of
each written spec: the same layout, memory per rank and simulated step, and
a Megatron pattern that is the spec's pinned pattern. Prints one line.

usage: check-plan.py HYPIPE PLAN_JSON [EXPLAIN_OPTION...] (the options the
plan timed with, e.g. --device h100 for --gpus)"""
import json
import re
import subprocess
import sys

hypipe, plan_json, options = sys.argv[1], sys.argv[2], sys.argv[3:]
plan = json.load(open(plan_json))
checked = 0
for c in plan["candidates"]:
    e = json.loads(subprocess.run([hypipe, "explain", c["spec"], "--json"] + options,
                                  check=True, capture_output=True,
                                  text=True).stdout)
    for key in ("tp", "sequence_parallel", "pp", "vpp", "dp", "schedule", "microbatches",
                "distributed_optimizer", "recompute"):
        assert e[key] == c[key], (c["spec"], key, e[key], c[key])
    # The plan holds layouts to hypipe-run's own buffers (SpecCosts.h
    # runtimeBuffers), which explain reports beside the cost model's.
    assert [r["runtime_memory_bytes"] for r in e["ranks"]] == c["peak_memory_bytes"]
    assert abs(e["simulation"]["makespan"] - c["predicted_step"]) <= \
        1e-9 * c["predicted_step"], c["spec"]
    assert not e["auto_partitioned"]
    # A row Megatron-LM can run carries its flags; one it cannot, the reason.
    if c["megatron_args"] is None:
        assert c["megatron_cannot_run"].startswith("Megatron-LM cannot run"), c
    else:
        pattern = re.search(r"--hybrid-override-pattern '([^']+)'",
                            c["megatron_args"]).group(1)
        assert pattern == e["pattern"], (pattern, e["pattern"])
    checked += 1
assert checked == len(plan["candidates"]) > 0
print(f"checked {checked} specs")
