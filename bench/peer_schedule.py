"""Peer for bench_schedule: the same work in plain Python — Megatron's
interleaved 1F1B order per rank (warm-up, steady 1F1B, cool-down over the
group table) and an all-ranks simulation that times every action by its
dependencies. Written for this benchmark (not Megatron's or PyTorch's code);
it is what a Python pipeline framework does when it dry-runs a schedule."""
import sys
import time


def build(pp, vpp, m, g):
    table = []
    for first in range(0, m, g):
        last = min(first + g, m)
        table += [(mb, c) for c in range(vpp) for mb in range(first, last)]
    total = m * vpp
    ranks = []
    for r in range(pp):
        warm = min((pp - r - 1) * 2 + (vpp - 1) * g, total)
        prog = []
        fwd = lambda k: ("F", table[k][1] * pp + r, table[k][0])
        bwd = lambda k: ("B", (vpp - 1 - table[k][1]) * pp + r, table[k][0])
        prog += [fwd(k) for k in range(warm)]
        for k in range(total - warm):
            prog.append(fwd(k + warm))
            prog.append(bwd(k))
        prog += [bwd(k) for k in range(total - warm, total)]
        ranks.append(prog)
    return ranks


def simulate(ranks, pp, vpp, m, f, b):
    stages = pp * vpp
    fend, bend = {}, {}
    pc = [0] * pp
    clock = [0.0] * pp
    progress = True
    while progress:
        progress = False
        for r in range(pp):
            prog = ranks[r]
            while pc[r] < len(prog):
                op, s, mb = prog[pc[r]]
                if op == "F":
                    dep = fend.get((s - 1, mb)) if s > 0 else 0.0
                    if dep is None:
                        break
                    start = max(clock[r], dep)
                    fend[(s, mb)] = clock[r] = start + f
                else:
                    if (s, mb) not in fend:
                        break
                    dep = bend.get((s + 1, mb)) if s < stages - 1 else 0.0
                    if dep is None:
                        break
                    start = max(clock[r], dep, fend[(s, mb)])
                    bend[(s, mb)] = clock[r] = start + b
                pc[r] += 1
                progress = True
    assert all(pc[r] == len(ranks[r]) for r in range(pp))
    return max(clock)


def main():
    pp, vpp, m = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    t0 = time.perf_counter()
    ranks = build(pp, vpp, m, pp)
    makespan = simulate(ranks, pp, vpp, m, 1.0 / vpp, 2.0 / vpp)
    t1 = time.perf_counter()
    busy = 3.0 * m
    print(f"{(t1 - t0) * 1e3:.1f} {1 - busy / makespan:.6f}")


main()
