"""The MoE layer as a PyTorch user writes it for speed (bench/peer_train.py):
each expert runs only on the rows routed to it (index_select, then
index_add_ of the weighted outputs), not on every token with a mask; the
routing and the load-balancing loss are the reference's own. Same function
as test/reference/torch_reference.moe (test/e2e/fast-peer.test)."""
import torch

import torch_reference as ref


def moe(x, p, d, act):
    B, S, Hd = x.shape
    E, k = d["experts"], d["topk"]
    xt = x.reshape(-1, Hd)
    T = xt.shape[0]
    probs, topi, w = ref.moe_route(xt, p, d)
    flat_e, flat_w = topi.reshape(-1), w.reshape(-1)
    flat_tok = torch.arange(T, device=x.device).repeat_interleave(k)
    out = torch.zeros_like(xt)
    per_expert = torch.bincount(flat_e, minlength=E)
    order = torch.argsort(flat_e, stable=True)
    ends = torch.cumsum(per_expert, 0).tolist()
    start = 0
    for e in range(E):
        sel = order[start:ends[e]]
        start = ends[e]
        if sel.numel() == 0:
            continue
        rows = flat_tok[sel]
        fc1, fc2 = p["mlp.experts.linear_fc1.weight%d" % e], p["mlp.experts.linear_fc2.weight%d" % e]
        ye = ref.activation(act, xt.index_select(0, rows) @ fc1.T) @ fc2.T
        # Under autocast ye is bf16 and out the residual stream's dtype.
        out.index_add_(0, rows, (ye * flat_w[sel, None]).to(out.dtype))
    return out.reshape(B, S, Hd), ref.moe_aux_loss(probs, per_expert.to(x.dtype), d)
