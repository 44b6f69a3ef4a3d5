"""Checks that the measured trace names actions as the simulated one does.

usage: check_trace_names.py MEASURED SIMULATED STEP

MEASURED is hypipe-run --trace's, SIMULATED hypipe schedule --trace's for the
same schedule and shape. Each pipeline rank's compute actions (F, B, I, W) of
STEP in the measured trace (data-parallel rank 0) must carry the simulated
rank's names, in the same order, and the same stage and microbatch in args:
Megatron's notation (`F3.1`, microbatch 3 on the rank's chunk 1), from one
function (schedule::megatronText).
"""
import json
import sys

COMPUTE = ("F", "B", "I", "W")


def actions(trace, step=None):
    by_rank = {}
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") not in COMPUTE or e.get("tid", 0) != 0:
            continue
        if step is not None and e["args"].get("step") != step:
            continue
        by_rank.setdefault(e["pid"], []).append(
            (e["name"], e["args"]["stage"], e["args"]["microbatch"]))
    return by_rank


def main():
    measured_path, simulated_path, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
    measured = actions(json.load(open(measured_path)), step)
    simulated = actions(json.load(open(simulated_path)))
    if not measured:
        sys.exit("FAIL: the measured trace has no compute actions of step %d" % step)
    if measured != simulated:
        for rank in sorted(set(measured) | set(simulated)):
            if measured.get(rank) != simulated.get(rank):
                sys.exit("FAIL: rank %d measured %s, simulated %s" % (
                    rank, measured.get(rank, [])[:6], simulated.get(rank, [])[:6]))
    count = sum(len(a) for a in measured.values())
    print("names agree: %d actions on %d ranks, first %s" % (
        count, len(measured), measured[min(measured)][0][0]))


if __name__ == "__main__":
    main()
