"""Mamba-2 written for speed in plain PyTorch (no custom kernels), as a
skilled PyTorch user writes it: the scan in its chunked (SSD) form, where
every chunk's work is a batched matmul and only the states pass from chunk to
chunk. Same parameters and same function as test/reference/torch_reference.py's
`mamba` (whose scan is the per-time-step recurrence, the correctness
reference); test/e2e/fast-peer.test checks that they agree in value and
gradient.

The recurrence, per head: h_t = exp(dt_t a) h_{t-1} + dt_t x_t B_t^T,
y_t = h_t C_t + D x_t. Within a chunk of L steps with cumulative log-decay
s_t = sum_{u<=t} dt_u a, the output splits into
  - the chunk's own inputs: y_t += sum_{u<=t} exp(s_t - s_u) (C_t . B_u) dt_u x_u
  - the state at the chunk's start: y_t += exp(s_t) h_start C_t
and the state at the chunk's end is exp(s_L) h_start + sum_u exp(s_L - s_u)
dt_u x_u B_u^T: one small sequential loop over chunks.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "reference"))
import torch_reference as ref  # noqa: E402

CHUNK = 64


def ssd_scan(x, dt, a, Bm, Cm, chunk=CHUNK):
    """x [b, s, h, p], dt [b, s, h] (after softplus), a [h] (negative),
    Bm/Cm [b, s, h, n] -> y [b, s, h, p] without the D term."""
    b, s, h, p = x.shape
    n = Bm.shape[-1]
    pad = (-s) % chunk
    if pad:
        x = F.pad(x, (0, 0, 0, 0, 0, pad))
        dt = F.pad(dt, (0, 0, 0, pad))
        Bm = F.pad(Bm, (0, 0, 0, 0, 0, pad))
        Cm = F.pad(Cm, (0, 0, 0, 0, 0, pad))
    c = x.shape[1] // chunk
    # [b, h, c, L] layouts for the per-head decays.
    logdecay = (dt * a).reshape(b, c, chunk, h).permute(0, 3, 1, 2)
    cum = torch.cumsum(logdecay, dim=-1)
    xdt = (x * dt[..., None]).reshape(b, c, chunk, h, p).permute(0, 3, 1, 2, 4)
    Bc = Bm.reshape(b, c, chunk, h, n).permute(0, 3, 1, 2, 4)
    Cc = Cm.reshape(b, c, chunk, h, n).permute(0, 3, 1, 2, 4)
    # Intra-chunk: (C B^T) masked by the causal decay, times the inputs.
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=x.device).tril()
    seg = cum[..., :, None] - cum[..., None, :]
    decay = torch.exp(seg.masked_fill(~causal, float("-inf")))
    scores = torch.matmul(Cc, Bc.transpose(-1, -2)) * decay
    y = torch.matmul(scores, xdt)
    # Each chunk's own contribution to the state at its end.
    to_end = torch.exp(cum[..., -1:] - cum)
    local = torch.matmul((xdt * to_end[..., None]).transpose(-1, -2), Bc)
    # States passed between chunks (the only sequential part).
    chunk_decay = torch.exp(cum[..., -1])
    state = torch.zeros(b, h, p, n, dtype=x.dtype, device=x.device)
    starts = []
    for k in range(c):
        starts.append(state)
        state = state * chunk_decay[..., k, None, None] + local[:, :, k]
    start = torch.stack(starts, dim=2)
    y = y + torch.matmul(Cc, start.transpose(-1, -2)) * torch.exp(cum)[..., None]
    y = y.permute(0, 2, 3, 1, 4).reshape(b, c * chunk, h, p)
    return y[:, :s]


def mamba(x, p, d):
    """The reference's Mamba-2 mixer (projections, conv, gated norm) with the
    chunked scan in place of the per-step one."""
    return ref.mamba(x, p, d, scan=ssd_scan)
