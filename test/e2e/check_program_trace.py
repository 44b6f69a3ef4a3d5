"""Checks that every rank ran its program as the manifest writes it.

usage: check_program_trace.py MANIFEST TRACE STEP

For each rank in the Chrome trace (hypipe-run --trace), the actions it traced
in STEP (waits for posted receives left out) must be one pipeline rank's
program from the artifact's manifest, in order, FSDP's UNSHARD and RESHARD
left out (no-ops, not traced), compared by kind, stage and microbatch
(the trace's category and args). A REDUCE_GRAD the runtime skipped, moved or
added makes the check fail.
"""
import json
import sys


def main():
    manifest_path, trace_path, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(manifest_path) as f:
        manifest = json.load(f)
    with open(trace_path) as f:
        trace = json.load(f)
    # An action is its kind, stage and microbatch: the manifest's op, stage
    # and mb; the trace's category and args (its name is Megatron's F3.1).
    programs = [[(a["op"], a["stage"], a["mb"]) for a in p["actions"]
                 if a["op"] not in ("UNSHARD", "RESHARD")]
                for p in manifest["programs"]]
    ran = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e["args"].get("step") != step:
            continue
        if e.get("tid", 0) != 0 or "stage" not in e["args"] or e["cat"] == "WAIT":
            continue
        ran.setdefault(e["pid"], []).append(  # in program order
            (e["cat"], e["args"]["stage"], e["args"]["microbatch"]))
    if not ran:
        sys.exit(f"FAIL: the trace has no actions of step {step}")
    reductions = 0
    for pid, events in sorted(ran.items()):
        names = events
        if names not in programs:
            sys.exit(f"FAIL: rank {pid} ran {names}, which is no program of "
                     f"the manifest")
        reductions += sum(op == "REDUCE_GRAD" for op, _, _ in names)
    print(f"{len(ran)} ranks ran their programs as written, "
          f"{reductions} REDUCE_GRAD among them")


if __name__ == "__main__":
    main()
