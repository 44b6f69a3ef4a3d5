"""Peer for bench_frontend: the same work (split main/MTP, check symbols,
place every segment on (pp_rank, vp_stage) with its layer offset) written in
plain Python the way Megatron-LM's hybrid_layer_allocation does it, one call
per (pp_rank, vp_stage) as every Megatron rank does. Written for this
benchmark; not Megatron's code."""
import sys
import time

VALID = set("M*-EGD+")


def parse(pattern):
    parts = pattern.split("/")
    main = parts[0]
    for c in main:
        if c not in VALID and c != "|":
            raise ValueError(c)
    if "*" in main and ("D" in main or "+" in main):
        raise ValueError("mix")
    return main


def select(main, pp, pp_rank, vp_stage):
    segments = main.split("|")
    if len(segments) % pp:
        raise ValueError("segments")
    index = vp_stage * pp + pp_rank
    offset = sum(len(segments[i]) for i in range(index))
    segment = segments[index]
    for c in segment:
        if c not in VALID:
            raise ValueError(c)
    return segment, offset


def main():
    pattern = open(sys.argv[1]).read()
    pp = int(sys.argv[2])
    reps = int(sys.argv[3])
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        main_part = parse(pattern)
        vpp = (main_part.count("|") + 1) // pp
        placed = [select(main_part, pp, r, v) for v in range(vpp) for r in range(pp)]
        times.append((time.perf_counter() - t0) * 1e3)
        assert sum(len(s) for s, _ in placed) == 10000
    times.sort()
    print(f"{times[len(times) // 2]:.2f}")


main()
