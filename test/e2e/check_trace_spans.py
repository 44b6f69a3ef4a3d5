"""Counts a measured trace's reduction and optimizer spans and memory counters.

usage: check_trace_spans.py TRACE

Prints, per world rank (pid, tid), the steps with a data-parallel gradient
reduction (an async "b"/"e" pair of category DP_REDUCTION, begin before
end), with an optimizer step (an "X" event of category OPTIMIZER), and the
samples of its tensor memory counter ("C", in_use and step_peak in MiB,
step_peak >= in_use > 0).
"""
import json
import sys


def main():
    trace = json.load(open(sys.argv[1]))
    reduction, optimizer, open_spans = {}, {}, {}
    counters = {}
    for e in trace["traceEvents"]:
        rank = (e.get("pid"), e.get("tid"))
        if e.get("cat") == "DP_REDUCTION" and e["ph"] == "b":
            open_spans[(rank, e["id"])] = e
        elif e.get("cat") == "DP_REDUCTION" and e["ph"] == "e":
            begin = open_spans.pop((rank, e["id"]))
            if e["ts"] >= begin["ts"]:
                reduction.setdefault(rank, set()).add(begin["args"]["step"])
        elif e.get("cat") == "OPTIMIZER" and e["ph"] == "X":
            optimizer.setdefault(rank, set()).add(e["args"]["step"])
        elif e.get("ph") == "C":
            a = e["args"]
            good = a["step_peak"] >= a["in_use"] > 0
            counters.setdefault(e["name"], []).append(good)
    for rank in sorted(set(reduction) | set(optimizer)):
        print("rank %s: reduction in steps %s, optimizer in steps %s" % (
            rank, sorted(reduction.get(rank, [])), sorted(optimizer.get(rank, []))))
    for name, samples in sorted(counters.items()):
        print("counter '%s': %d samples%s" % (
            name, len(samples), "" if all(samples) else ", some not peak >= in use > 0"))
    if open_spans:
        print("unclosed reduction spans: %d" % len(open_spans))


if __name__ == "__main__":
    main()
