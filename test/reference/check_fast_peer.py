#!/usr/bin/python3
"""The speed peer's Mamba-2 (bench/fast_mamba.py, chunked SSD scan) is the
same function as the correctness reference's (torch_reference.mamba, the
per-step recurrence): output and every input and parameter gradient agree in
float64, for a sequence that is not a multiple of the chunk, several chunks,
several groups; and a wrong chunk boundary would be caught (a broken variant
must disagree). The projections, conv and gated norm around the scan are
shared code; the check is about the scan. The peer's MoE (bench/fast_moe.py,
rows dispatched to their experts) equals the reference's likewise. Prints PASS or FAIL with the worst relative error."""
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
import fast_mamba  # noqa: E402
import fast_moe  # noqa: E402
import torch_reference as ref  # noqa: E402

torch.manual_seed(0)
d = {"heads": 4, "head_dim": 8, "state": 16, "groups": 2, "conv": 4}
H, P, N, G, K, hidden = d["heads"], d["head_dim"], d["state"], d["groups"], d["conv"], 24
inner = H * P
conv_ch = inner + 2 * G * N
dt = torch.float64
params = {
    "mixer.in_proj.weight": torch.randn(2 * inner + 2 * G * N + H, hidden, dtype=dt) * 0.2,
    "mixer.conv1d_weight": torch.randn(conv_ch, 1, K, dtype=dt) * 0.3,
    "mixer.conv1d_bias": torch.randn(conv_ch, dtype=dt) * 0.1,
    "mixer.dt_bias": torch.randn(H, dtype=dt) * 0.5,
    "mixer.A_log": torch.log(torch.rand(H, dtype=dt) * 4 + 1),
    "mixer.D": torch.randn(H, dtype=dt),
    "mixer.norm.weight": torch.rand(inner, dtype=dt) + 0.5,
    "mixer.out_proj.weight": torch.randn(hidden, inner, dtype=dt) * 0.2,
}


def run(fn, x):
    ps = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    xi = x.clone().requires_grad_(True)
    y = fn(xi, ps, d)
    w = torch.linspace(-1, 1, y.numel(), dtype=dt).reshape(y.shape)
    (y * w).sum().backward()
    return [y.detach(), xi.grad] + [ps[k].grad for k in sorted(ps)]


def worst(a, b):
    return max(((u - v).norm() / v.norm().clamp_min(1e-30)).item() for u, v in zip(a, b))


errors = []
for seq in (150, 64, 7):  # 3 chunks with a partial one; exactly one; less than one
    x = torch.randn(2, seq, hidden, dtype=dt)
    err = worst(run(fast_mamba.mamba, x), run(ref.mamba, x))
    print("seq %d: worst relative error %.2e" % (seq, err))
    if not err < 1e-10:
        errors.append("seq %d: %.2e" % (seq, err))

# The check can fail: dropping the state passed between chunks must show.
saved = fast_mamba.ssd_scan


def no_carry(x, dt_, a, Bm, Cm, chunk=fast_mamba.CHUNK):
    y_full = saved(x, dt_, a, Bm, Cm, chunk)
    y_parts = [saved(x[:, i:i + chunk], dt_[:, i:i + chunk], a, Bm[:, i:i + chunk],
                     Cm[:, i:i + chunk], chunk) for i in range(0, x.shape[1], chunk)]
    return torch.cat(y_parts, dim=1) if y_full is not None else None


fast_mamba.ssd_scan = no_carry
x = torch.randn(2, 150, hidden, dtype=dt)
broken = worst(run(fast_mamba.mamba, x), run(ref.mamba, x))
fast_mamba.ssd_scan = saved
print("without the carried state: %.2e" % broken)
if not broken > 1e-3:
    errors.append("a scan without carried states went unnoticed (%.2e)" % broken)
# The peer's MoE (rows dispatched to their experts) against the reference's
# (every expert on every token, masked): output, input and every parameter
# gradient, aux loss included.
E, moe_hidden, ffn = 4, 12, 10
moe_params = {"mlp.router.weight": torch.randn(E, moe_hidden, dtype=dt)}
for e in range(E):
    moe_params["mlp.experts.linear_fc1.weight%d" % e] = torch.randn(ffn, moe_hidden, dtype=dt) * 0.3
    moe_params["mlp.experts.linear_fc2.weight%d" % e] = torch.randn(moe_hidden, ffn, dtype=dt) * 0.3
moe_dims = {"experts": E, "topk": 2, "aux_coeff": 0.01}


def run_moe(fn, x):
    ps = {k: v.clone().requires_grad_(True) for k, v in moe_params.items()}
    xi = x.clone().requires_grad_(True)
    y, aux = fn(xi, ps, moe_dims, "squared_relu")
    w = torch.linspace(-1, 1, y.numel(), dtype=dt).reshape(y.shape)
    ((y * w).sum() + 3 * aux).backward()
    return [y.detach(), aux.detach().reshape(1), xi.grad] + [ps[k].grad for k in sorted(ps)]


x = torch.randn(3, 11, moe_hidden, dtype=dt)
err = worst(run_moe(fast_moe.moe, x), run_moe(ref.moe, x))
print("moe: worst relative error %.2e" % err)
if not err < 1e-10:
    errors.append("moe: %.2e" % err)
print("FAIL: " + "; ".join(errors) if errors else "PASS")
sys.exit(1 if errors else 0)
