"""The MoE layer as a PyTorch user writes it for speed (bench/peer_train.py):
each expert runs only on the rows routed to it (index_select, then
index_add_ of the weighted outputs), not on every token with a mask. Same
function as test/reference/torch_reference.moe (test/e2e/fast-peer.test)."""
import torch

import torch_reference as ref


def moe(x, p, d, act):
    B, S, Hd = x.shape
    E, k, coeff = d["experts"], d["topk"], d["aux_coeff"]
    xt = x.reshape(-1, Hd)
    T = xt.shape[0]
    probs = (xt @ p["mlp.router.weight"].T).softmax(-1)
    topv, topi = probs.topk(k, dim=-1)
    w = topv / topv.sum(-1, keepdim=True)
    flat_e, flat_w = topi.reshape(-1), w.reshape(-1)
    flat_tok = torch.arange(T).repeat_interleave(k)
    out = torch.zeros_like(xt)
    counts = torch.bincount(flat_e, minlength=E).to(x.dtype)
    order = torch.argsort(flat_e, stable=True)
    ends = torch.cumsum(torch.bincount(flat_e, minlength=E), 0).tolist()
    start = 0
    for e in range(E):
        sel = order[start:ends[e]]
        start = ends[e]
        if sel.numel() == 0:
            continue
        rows = flat_tok[sel]
        fc1, fc2 = p["mlp.experts.linear_fc1.weight%d" % e], p["mlp.experts.linear_fc2.weight%d" % e]
        ye = ref.activation(act, xt.index_select(0, rows) @ fc1.T) @ fc2.T
        out.index_add_(0, rows, ye * flat_w[sel, None])
    aux = coeff * E / (T * T * k) * (probs.sum(0) * counts).sum()
    return out.reshape(B, S, Hd), aux
