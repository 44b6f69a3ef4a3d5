"""Recomputes `hypipe explain --device h100 --json`'s step from its stage
costs with the h100 row of docs/plan.md and the ring formulas, written out
here again: compute at 989 TFLOP/s x 0.40 (bf16), NVLink 360 GB/s + 8 us
within a node of 8, 45 GB/s + 15 us between nodes; fp32 gradients, bf16
parameters gathered; each stage's gradients reduced in buckets of 4M floats
(hypipe-run's 16 MiB), bucket j of k ready j/k of the way through the last
backward's weight-gradient part, one after another."""
import json
import sys

RATE = 989e12 * 0.40
INTRA = (360e9, 8e-6)
INTER = (45e9, 15e-6)


def ring_half(n, nbytes, link):
    """A reduce-scatter or an all-gather: n - 1 steps of nbytes / n."""
    bw, lat = link
    return (n - 1) * lat + (n - 1) / n * nbytes / bw


BUCKET = 4 << 20


def reduced(end, w, params, total):
    """When a stage's bucketed reduction of `total` seconds is in, its last
    backward ending at `end` with a weight-gradient part of `w` seconds."""
    k = max(1, -(-params // BUCKET))
    free = 0.0
    for j in range(1, k + 1):
        free = max(free, end - w * (k - j) / k) + total / k
    return free


def main():
    mode, path = sys.argv[1], sys.argv[2]
    e = json.load(open(path))
    sim = e["simulation"]
    m, dp = e["microbatches"], e["dp"]
    st = e["stages"]
    f = [s["forward_flops"] / RATE for s in st]
    b = [(s["backward_input_flops"] + s["backward_weight_flops"]) / RATE
         for s in st]
    w = [s["backward_weight_flops"] / RATE for s in st]
    params = [s["parameters"] for s in st]
    if mode in ("dp", "zero"):
        assert e["pp"] == 1 and dp == 8, e
        compute = m * (f[0] + b[0])
        if mode == "dp":
            reduce = 2 * ring_half(dp, params[0] * 4, INTRA)
            after = 0
            what = "intra-node all-reduce"
        else:
            reduce = ring_half(dp, params[0] * 4, INTRA)
            after = ring_half(dp, params[0] * 2, INTRA)
            what = "reduce-scatter + all-gather"
        expected = max(compute, reduced(compute, w[0], params[0], reduce)) + after
    else:
        assert e["pp"] == 2 and dp == 8 and m == 1, e
        hand = INTER[1] + st[0]["send_bytes"] / INTER[0]
        r0 = 2 * ring_half(dp, params[0] * 4, INTRA)
        r1 = 2 * ring_half(dp, params[1] * 4, INTRA)
        backward1_end = f[0] + hand + f[1] + b[1]
        backward0_end = backward1_end + hand + b[0]
        end0 = max(backward0_end, reduced(backward0_end, w[0], params[0], r0))
        end1 = max(backward1_end, reduced(backward1_end, w[1], params[1], r1))
        expected = max(end0, end1)
        what = "inter-node hand-offs"
    got = sim["predicted_step_s"]
    rel = abs(got - expected) / expected
    if rel > 1e-9:
        sys.exit(f"step {got} s, expected {expected} s ({what}): off by {rel}")
    print(f"step agrees: {got:.6g} s ({what})")


main()
