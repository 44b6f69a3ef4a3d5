#!/usr/bin/python3
"""Independent PyTorch reference for a compiled hypipe model.

Reads an artifact's manifest (layer kinds, shapes, parameter names) and the
safetensors file `hypipe-run --dump-step` wrote (initial parameters, the
first step's batch, hypipe's loss and gradients). Rebuilds the model from
docs/model.md in float64 with autograd, and compares the loss and every
parameter gradient. Exits 1 when any relative error (norm-wise) exceeds the
tolerance.

A bf16 artifact (the manifest's precision) is rebuilt under the rules of
docs/precision.md, still in float64: every parameter the model computes
with is its main weight rounded to bfloat16 (the gradient goes to the main
weight unrounded), and every activation -- each tensor a kernel stores --
is rounded to bfloat16 once it is complete, in forward and its gradient in
backward (`stored` below). `--rules fp32` drops the rounding: the distance of
a bf16 run to that model is what the emulation adds, and a test shows its
tolerance tells the two apart.

`--figure NAME` also prints the largest relative error as the GPU kit's
figure line `@figure NAME VALUE -`.

`--batch FILE` checks a forward alone (hypipe's validation loss): the
dump's parameters on the microbatches of FILE (JSON: "tokens" and "labels",
[microbatch][row][position], and hypipe's "loss"), the loss the mean of
the microbatches' cross-entropies (validation_batch.py writes it).

usage: torch_reference.py ARTIFACT DUMP [--tol 1e-4] [--rules fp32|bf16]
                          [--figure NAME] [--batch FILE]
"""
import argparse
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F

EPS = 1e-5


class _RoundActivation(torch.autograd.Function):
    """A complete activation to bfloat16 (round to nearest even), and its
    gradient likewise once autograd has summed every consumer's part."""

    @staticmethod
    def forward(ctx, x):
        return x.to(torch.bfloat16).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(torch.bfloat16).to(g.dtype)


class _RoundParameter(torch.autograd.Function):
    """The bf16 copy of a main weight; its gradient reaches the fp32 main
    gradient unrounded (Megatron's main_grad)."""

    @staticmethod
    def forward(ctx, p):
        return p.to(torch.bfloat16).to(p.dtype)

    @staticmethod
    def backward(ctx, g):
        return g


BF16 = False


def stored(x):
    """An activation as the kernels store it: rounded under bf16 rules."""
    return _RoundActivation.apply(x) if BF16 else x


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        dtype = {"F32": torch.float32, "I32": torch.int32}[t["dtype"]]
        buf = bytearray(raw[base + lo:base + hi])
        out[name] = torch.frombuffer(buf, dtype=dtype).reshape(t["shape"]).clone()
    return out, meta


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def activation(name, h):
    if name == "squared_relu":
        return F.relu(h).pow(2)
    if name == "gelu":
        return F.gelu(h)
    if name == "swiglu":
        g, u = torch.chunk(h, 2, dim=-1)
        return F.silu(g) * u
    raise ValueError(name)


def sequential_scan(xs, dt, A, Bm, Cm):
    """The SSD recurrence one time step at a time (the definition):
    xs [b, s, h, p], dt [b, s, h], A [h], Bm/Cm [b, s, h, n] -> y without D."""
    B, S, H, P = xs.shape
    h = torch.zeros(B, H, P, Bm.shape[-1], dtype=xs.dtype)
    ys = []
    for t in range(S):
        a = torch.exp(dt[:, t] * A)[..., None, None]
        h = a * h + (dt[:, t, :, None] * xs[:, t])[..., None] * Bm[:, t, :, None, :]
        ys.append((h * Cm[:, t, :, None, :]).sum(-1))
    return torch.stack(ys, dim=1)


def mamba(x, p, d, scan=sequential_scan):
    B, S, _ = x.shape
    H, P, N, G, K = d["heads"], d["head_dim"], d["state"], d["groups"], d["conv"]
    I = H * P
    zxbcdt = stored(x @ p["mixer.in_proj.weight"].T)
    z, xbc, dt = torch.split(zxbcdt, [I, I + 2 * G * N, H], dim=-1)
    conv = F.conv1d(xbc.transpose(1, 2), p["mixer.conv1d_weight"],
                    p["mixer.conv1d_bias"], padding=K - 1, groups=xbc.shape[-1])
    xbc = stored(F.silu(conv[..., :S].transpose(1, 2)))
    xs, Bm, Cm = torch.split(xbc, [I, G * N, G * N], dim=-1)
    xs = xs.reshape(B, S, H, P)
    Bm = Bm.reshape(B, S, G, N).repeat_interleave(H // G, dim=2)
    Cm = Cm.reshape(B, S, G, N).repeat_interleave(H // G, dim=2)
    dt = F.softplus(dt + p["mixer.dt_bias"])
    A = -torch.exp(p["mixer.A_log"])
    y = stored(scan(xs, dt, A, Bm, Cm) + p["mixer.D"][None, None, :, None] * xs)
    y = y.reshape(B, S, I)
    g = (y * F.silu(z)).reshape(B, S, G, I // G)
    g = g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + EPS)
    g = stored(g.reshape(B, S, I) * p["mixer.norm.weight"])
    return stored(g @ p["mixer.out_proj.weight"].T)


def sequential_gated_delta_rule(q, k, v, g, beta):
    """The gated delta rule one token at a time (the definition, no chunks):
    q, k [s, h, dk] (l2-normalised, q not yet scaled), v [s, h, dv], g and
    beta [s, h]; from a zero state S [h, dk, dv],
    S_t = e^{g_t} (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T and
    o_t = S_t^T q_t / sqrt(dk)."""
    S_len, H, DK = k.shape
    S = torch.zeros(H, DK, v.shape[-1], dtype=v.dtype)
    outs = []
    for t in range(S_len):
        S = torch.exp(g[t])[:, None, None] * S
        kt, vt, bt = k[t], v[t], beta[t][:, None]
        # (I - b k k^T) S + b k v^T = S + k (b (v - S^T k))^T
        delta = bt * (vt - torch.einsum("hkv,hk->hv", S, kt))
        S = S + kt[:, :, None] * delta[:, None, :]
        outs.append(torch.einsum("hkv,hk->hv", S, q[t]) / math.sqrt(DK))
    return torch.stack(outs)


def gated_delta_net(x, p, d, cu_seqlens=None):
    """Megatron-LM's GatedDeltaNet (megatron/core/ssm/gated_delta_net.py) on
    x [b, s, H] (already normed), the conv and the state restarting at each
    boundary of cu_seqlens (over the flattened tokens) when given."""
    B, S, _ = x.shape
    nk, nv, dk, dv, K = d["key_heads"], d["value_heads"], d["key_dim"], d["value_dim"], d["conv"]
    qkvzba = stored(x @ p["self_attention.in_proj.weight"].T).reshape(B * S, -1)
    qkv, z, b, a = torch.split(qkvzba, [2 * nk * dk + nv * dv, nv * dv, nv, nv], dim=-1)
    if cu_seqlens is None:
        cu_seqlens = list(range(0, B * S + 1, S))
    out = []
    for lo, hi in zip(cu_seqlens[:-1], cu_seqlens[1:]):
        n = hi - lo
        conv = F.conv1d(qkv[lo:hi].T[None], p["self_attention.conv1d.weight"],
                        padding=K - 1, groups=qkv.shape[-1])
        c = stored(F.silu(conv[0, :, :n].T))
        q, k, v = torch.split(c, [nk * dk, nk * dk, nv * dv], dim=-1)
        q = q.reshape(n, nk, dk)
        k = k.reshape(n, nk, dk)
        q = q / torch.sqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k / torch.sqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        # Value head j reads key head j / (nv / nk).
        q = q.repeat_interleave(nv // nk, dim=1)
        k = k.repeat_interleave(nv // nk, dim=1)
        g = -torch.exp(p["self_attention.A_log"]) * F.softplus(a[lo:hi] + p["self_attention.dt_bias"])
        beta = torch.sigmoid(b[lo:hi])
        o = stored(sequential_gated_delta_rule(q, k, v.reshape(n, nv, dv), g, beta))
        o = o * torch.rsqrt(o.pow(2).mean(-1, keepdim=True) + EPS) * p["self_attention.out_norm.weight"]
        o = stored(o * F.silu(z[lo:hi].reshape(n, nv, dv)))
        out.append(o.reshape(n, nv * dv))
    y = torch.cat(out).reshape(B, S, nv * dv)
    return stored(y @ p["self_attention.out_proj.weight"].T)


def rope(t, base=10000.0):
    B, S, Hh, D = t.shape
    # Angles in float64 on t's device, then in t's dtype (float64 here; the
    # speed peers' float32 or bf16).
    inv = base ** (-torch.arange(0, D // 2, dtype=torch.float64, device=t.device) * 2.0 / D)
    ang = torch.arange(S, dtype=torch.float64, device=t.device)[:, None] * inv[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], -1)[None, :, None, :].to(t.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1)[None, :, None, :].to(t.dtype)
    rot = torch.cat([-t[..., D // 2:], t[..., :D // 2]], -1)
    return t * cos + rot * sin


def softmax_attention(q, k, v):
    """Causal softmax attention: q, k, v [b, s, heads, d] -> [b, s, heads, d]."""
    S, D = q.shape[1], q.shape[-1]
    s = torch.einsum("bshd,bthd->bhst", q, k) / math.sqrt(D)
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
    s = s.masked_fill(mask, float("-inf")).softmax(-1)
    return torch.einsum("bhst,bthd->bshd", s, v)


def attention(x, p, d, core=softmax_attention):
    """Megatron's attention (query heads grouped with their key and value
    head in the QKV projection's rows); `core` is the attention proper on the
    heads laid out [b, s, heads, d], key and value heads repeated per query."""
    B, S, _ = x.shape
    H, G, D = d["heads"], d["groups"], d["head_dim"]
    qpg = H // G
    qkv = stored(x @ p["self_attention.linear_qkv.weight"].T).reshape(B, S, G, qpg + 2, D)
    q = qkv[:, :, :, :qpg].reshape(B, S, H, D)
    k = qkv[:, :, :, qpg]
    v = qkv[:, :, :, qpg + 1]
    if d["rope"]:
        q, k = stored(rope(q)), stored(rope(k))
    k = k.repeat_interleave(qpg, dim=2)
    v = v.repeat_interleave(qpg, dim=2)
    ctx = stored(core(q, k, v)).reshape(B, S, H * D)
    return stored(ctx @ p["self_attention.linear_proj.weight"].T)


def yarn_get_mscale(scale, mscale):
    """Megatron's _yarn_get_mscale."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def mla_rotary(S, d, device=None):
    """MLA's rotary angles [S, pe/2] and the factor on cos and sin: Megatron's
    RotaryEmbedding (rope_type rope) or YarnRotaryEmbedding (yarn: the
    frequencies ramped between interpolation and extrapolation, and the
    concentration factor), in float64."""
    D, base = d["qk_pos_emb_head_dim"], d.get("rotary_base", 10000.0)
    dims = torch.arange(0, D, 2, dtype=torch.float64, device=device)
    extra = 1.0 / base ** (dims / D)
    factor = 1.0
    if d["rope_type"] == "yarn":
        f, orig = d["rotary_scaling_factor"], d.get("original_max_position_embeddings", 4096)
        corr = lambda rot: D * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(corr(d.get("beta_fast", 32.0))), 0)
        high = min(math.ceil(corr(d.get("beta_slow", 1.0))), D - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(D // 2, dtype=torch.float64, device=device) - low) / (high - low)).clamp(0, 1)
        mask = 1.0 - ramp
        extra = (extra / f) * (1 - mask) + extra * mask
        factor = yarn_get_mscale(f, d["mscale"]) / yarn_get_mscale(f, d["mscale_all_dim"])
    ang = torch.arange(S, dtype=torch.float64, device=device)[:, None] * extra[None, :]
    return ang, factor


def mla_rope(t, ang, factor):
    """Megatron's rotary embedding for MLA (multi_latent_attention=True): the
    channels de-interleaved (even ones, then odd ones) and rotated
    rotate-half; the result stays de-interleaved. t [b, s, heads, pe]."""
    t = torch.cat([t[..., 0::2], t[..., 1::2]], -1)
    D = t.shape[-1]
    cos = (torch.cat([ang.cos(), ang.cos()], -1) * factor)[None, :, None, :].to(t.dtype)
    sin = (torch.cat([ang.sin(), ang.sin()], -1) * factor)[None, :, None, :].to(t.dtype)
    rot = torch.cat([-t[..., D // 2:], t[..., :D // 2]], -1)
    return t * cos + rot * sin


def mla_qkv(x, p, d):
    """Megatron's MLASelfAttention up to its core, on the normed input x
    [b, s, hidden]: queries through linear_q_down_proj, its RMSNorm with
    qk_layernorm and linear_q_up_proj (or one linear_q_proj); [c_kv, k_pe]
    from linear_kv_down_proj, keys and values from the (normed) c_kv through
    linear_kv_up_proj (rows per head [k_nope; v]); k_pe one head shared by
    all; RoPE on q_pe and k_pe. Returns query, key, value [b, s, heads, *],
    the scores' scale mscale(f, mscale_all_dim)^2 / sqrt(qk + pe), the
    query latent before its norm (the normed input without q_lora_rank:
    what DSA's indexer reads as qr) and the rotary angles and factor."""
    B, S, _ = x.shape
    n, qk, pe, v = d["heads"], d["qk_head_dim"], d["qk_pos_emb_head_dim"], d["v_head_dim"]
    a = "self_attention."
    if d["q_lora_rank"]:
        cq = qr = stored(x @ p[a + "linear_q_down_proj.weight"].T)
        if d["qk_layernorm"]:
            cq = stored(rmsnorm(cq, p[a + "linear_q_up_proj.layer_norm_weight"]))
        q = stored(cq @ p[a + "linear_q_up_proj.weight"].T)
    else:
        qr = x
        q = stored(x @ p[a + "linear_q_proj.weight"].T)
    q = q.reshape(B, S, n, qk + pe)
    kv = stored(x @ p[a + "linear_kv_down_proj.weight"].T)
    ckv, kpe = kv[..., :d["kv_lora_rank"]], kv[..., d["kv_lora_rank"]:]
    if d["qk_layernorm"]:
        ckv = stored(rmsnorm(ckv, p[a + "linear_kv_up_proj.layer_norm_weight"]))
    kv = stored(ckv @ p[a + "linear_kv_up_proj.weight"].T).reshape(B, S, n, qk + v)
    ang, factor = mla_rotary(S, d, x.device)
    qpe = stored(mla_rope(q[..., qk:], ang, factor))
    kpe = stored(mla_rope(kpe[:, :, None, :], ang, factor))
    query = torch.cat([q[..., :qk], qpe], -1)
    key = torch.cat([kv[..., :qk], kpe.expand(B, S, n, pe)], -1)
    value = kv[..., qk:]
    m = yarn_get_mscale(d["rotary_scaling_factor"], d["mscale_all_dim"])
    return query, key, value, m * m / math.sqrt(qk + pe), qr, (ang, factor)


def causal_mask(S, device=None):
    """[S, S] True above the diagonal: the keys a query may not see."""
    return torch.ones(S, S, dtype=torch.bool, device=device).triu(1)


def mla(x, p, d):
    """Megatron's MLASelfAttention on the normed input x [b, s, hidden]
    (mla_qkv), causal attention and linear_proj."""
    B, S, _ = x.shape
    query, key, value, scale, _, _ = mla_qkv(x, p, d)
    s = torch.einsum("bshd,bthd->bhst", query, key) * scale
    s = s.masked_fill(causal_mask(S, x.device), float("-inf")).softmax(-1)
    ctx = stored(torch.einsum("bhst,bthd->bshd", s, value)).reshape(B, S, -1)
    return stored(ctx @ p["self_attention.linear_proj.weight"].T)


def dsa_index_scores(x, qr, p, d, rotary):
    """Megatron's DSAIndexer.forward_with_scores on the normed input x and
    the query latent qr (both detached by the caller), without the Hadamard
    rotation (orthonormal: it changes no score): q from linear_wq_b, k from
    linear_wk and the LayerNorm k_norm, RoPE (MLA's, de-interleaved) on the
    last qk_pos_emb_head_dim channels of each, head weights from
    linear_weights_proj times n^-1/2 d^-1/2; I[b, s, t] = sum_h w[s, h]
    ReLU(q[s, h] . k[t]), -inf above the diagonal."""
    B, S, _ = x.shape
    n, hd, pe = d["dsa_indexer_n_heads"], d["dsa_indexer_head_dim"], d["qk_pos_emb_head_dim"]
    i = "self_attention.core_attention.indexer."
    ang, factor = rotary
    q = stored(qr @ p[i + "linear_wq_b.weight"].T).reshape(B, S, n, hd)
    q = stored(torch.cat([q[..., :hd - pe], mla_rope(q[..., hd - pe:], ang, factor)], -1))
    k = stored(x @ p[i + "linear_wk.weight"].T)
    k = stored(F.layer_norm(k, (hd,), p[i + "k_norm.weight"], p[i + "k_norm.bias"], EPS))
    k = k[:, :, None, :]
    k = stored(torch.cat([k[..., :hd - pe], mla_rope(k[..., hd - pe:], ang, factor)], -1))[:, :, 0]
    w = stored(x @ p[i + "linear_weights_proj.weight"].T) * (n ** -0.5 * hd ** -0.5)
    scores = (torch.relu(torch.einsum("bshd,btd->bsht", q, k)) * w[..., None]).sum(2)
    return scores.masked_fill(causal_mask(S, x.device), float("-inf"))


DSA_TIES = [0]  # rows whose top-k cut splits equal scores (dsa_topk)


def dsa_topk(scores, topk):
    """[b, s, s] True where query s keeps key t: its min(topk, s) highest
    index scores (Megatron's topk(min(index_topk, seqlen))), equal scores to
    the lower key index (a stable sort: torch.topk leaves ties' order
    open), and of those the causal ones (a query near the start may have
    picked -inf keys after it, which Megatron's causal mask drops)."""
    S = scores.shape[-1]
    ranked, order = torch.sort(scores, dim=-1, descending=True, stable=True)
    if topk < S:
        # Rows whose cut falls between equal (finite) scores: the order of
        # ties decides their selection.
        cut = ranked[..., topk - 1]
        DSA_TIES[0] += int(((cut == ranked[..., topk]) & cut.isfinite()).sum())
    keep = torch.zeros_like(scores, dtype=torch.bool)
    keep.scatter_(-1, order[..., :min(topk, S)], True)
    return keep & ~causal_mask(S, scores.device)


def dsa_indexer_loss(scores, keep, query, key, scale, coeff, sparse):
    """Megatron's compute_dsa_indexer_loss: the attention's distribution
    (causal softmax of every head, summed over the heads, L1-normalised;
    query and key detached) against the softmax of the index scores,
    KL(target || index) with 1e-10 inside the logs, summed over the keys,
    the mean over the queries, times coeff; with sparse both restricted to
    the top-k keys."""
    S = scores.shape[-1]
    a = torch.einsum("bshd,bthd->bhst", query.detach(), key.detach()) * scale
    a = a.masked_fill(causal_mask(S, a.device), float("-inf"))
    if sparse:
        a = a.masked_fill(~keep[:, None], float("-inf"))
        scores = scores.masked_fill(~keep, float("-inf"))
    target = a.softmax(-1).sum(1)
    target = target / target.sum(-1, keepdim=True)
    index = scores.softmax(-1)
    kl = target * (torch.log(target + 1e-10) - torch.log(index + 1e-10))
    return kl.sum(-1).mean() * coeff


def dsa_attention(query, key, value, keep, scale):
    """Megatron's unfused_dsa_fn: softmax attention [b, s, heads, *] over
    the keys `keep` [b, s, s] allows each query (dsa_topk)."""
    s = torch.einsum("bshd,bthd->bhst", query, key) * scale
    s = s.masked_fill(~keep[:, None], float("-inf")).softmax(-1)
    return torch.einsum("bhst,bthd->bshd", s, value)


def dsa(x, p, d):
    """Megatron's DSAttention inside MLASelfAttention on the normed input x:
    MLA's query, key and value (mla_qkv; the absorbed single-key-head form
    of DeepSeek-V3.2 computes the same scores), the indexer on x and the
    query latent, both detached, each query attending only to its top-k
    keys, linear_proj. Returns the output and the indexer's loss (trained
    through nothing but the indexer's parameters)."""
    B, S, _ = x.shape
    query, key, value, scale, qr, rotary = mla_qkv(x, p, d)
    scores = dsa_index_scores(x.detach(), qr.detach(), p, d, rotary)
    keep = dsa_topk(scores.detach(), d["dsa_indexer_topk"])
    ctx = stored(dsa_attention(query, key, value, keep, scale)).reshape(B, S, -1)
    loss = dsa_indexer_loss(scores, keep, query, key, scale, d["dsa_indexer_loss_coeff"],
                            d.get("dsa_indexer_use_sparse_loss", False))
    return stored(ctx @ p["self_attention.linear_proj.weight"].T), loss


def mlp(x, p, act):
    h = stored(activation(act, stored(x @ p["mlp.linear_fc1.weight"].T)))
    return stored(h @ p["mlp.linear_fc2.weight"].T)


def moe_route(xt, p, d):
    """Router probabilities, each token's top-k experts and their
    renormalised weights."""
    probs = stored(xt @ p["mlp.router.weight"].T).softmax(-1)
    # Ties (equal bf16 logits give equal probabilities) to the lower
    # expert, as hypipe's router breaks them: a stable descending sort.
    order = torch.sort(probs.detach(), dim=-1, descending=True, stable=True).indices
    topi = order[:, :d["topk"]]
    topv = probs.gather(-1, topi)
    return probs, topi, topv / topv.sum(-1, keepdim=True)


def moe_aux_loss(probs, counts, d):
    """Megatron's load-balancing loss from the router probabilities and the
    tokens each expert got."""
    T, E, k = probs.shape[0], d["experts"], d["topk"]
    return d["aux_coeff"] * E / (T * T * k) * (probs.sum(0) * counts).sum()


def moe_capacity_mask(topi, w, d, B, S):
    """Megatron-LM's token dropping (apply_router_token_dropping): its router
    sees a microbatch as [S, B] (position-major; the rows here are
    sample-major) and, with sequence parallelism over tp ranks, each rank
    the positions [r S / tp, (r+1) S / tp) of every sample. In each such
    block an expert takes at most ceil(tokens * k / E * factor) of the
    tokens routed to it: those of the highest routing weights (policy
    probs; equal weights to the earlier token) or the earliest (position).
    True where a (token, slot) choice is kept; all True when dropless."""
    factor = d.get("capacity_factor") or 0
    keep = torch.ones(topi.shape, dtype=torch.bool)
    if factor <= 0:
        return keep
    k, blocks = topi.shape[1], d.get("capacity_blocks", 1)
    for b in range(blocks):
        positions = range(b * S // blocks, (b + 1) * S // blocks)
        rows = torch.tensor([n * S + pos for pos in positions for n in range(B)])
        capacity = math.ceil((len(rows) * k / d["experts"]) * factor)
        for e in range(d["experts"]):
            at, slots = (topi[rows] == e).nonzero(as_tuple=True)  # in order
            tokens = rows[at]
            if len(tokens) <= capacity:
                continue
            if d.get("drop_policy", "probs") == "probs":
                order = torch.sort(w.detach()[tokens, slots], descending=True,
                                   stable=True).indices
            else:
                order = torch.arange(len(tokens))
            dropped = order[capacity:]
            keep[tokens[dropped], slots[dropped]] = False
    return keep


def moe(x, p, d, act):
    B, S, Hd = x.shape
    E = d["experts"]
    xt = x.reshape(-1, Hd)
    probs, topi, w = moe_route(xt, p, d)
    keep = moe_capacity_mask(topi, w, d, B, S)
    out = torch.zeros_like(xt)
    counts = torch.zeros(E, dtype=x.dtype)
    for e in range(E):
        chosen = topi == e
        # The load-balancing loss counts the choices before any was dropped.
        counts[e] = chosen.sum()
        we = (w * (chosen & keep)).sum(-1)
        fc1, fc2 = p["mlp.experts.linear_fc1.weight%d" % e], p["mlp.experts.linear_fc2.weight%d" % e]
        ye = stored(stored(activation(act, stored(xt @ fc1.T))) @ fc2.T)
        out = out + we[:, None] * ye
    return stored(out).reshape(B, S, Hd), moe_aux_loss(probs, counts, d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifact")
    ap.add_argument("dump")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--rules", choices=["fp32", "bf16"],
                    help="the precision's rules to rebuild the model under "
                    "(default: the artifact's precision)")
    ap.add_argument("--figure", help="print the largest relative error as "
                    "'@figure NAME VALUE -' (the GPU kit's figures)")
    ap.add_argument("--batch", help="check the forward alone on this "
                    "batch (JSON: tokens, labels and hypipe's loss)")
    args = ap.parse_args()
    manifest = json.load(open(args.artifact + "/manifest.json"))
    spec_dims = manifest["model"]
    tensors, meta = load_safetensors(args.dump)
    if args.batch:
        batch = json.load(open(args.batch))
        tensors["tokens"] = torch.tensor(batch["tokens"])
        tensors["labels"] = torch.tensor(batch["labels"])
        meta = {"loss": repr(batch["loss"])}
    global BF16
    BF16 = (args.rules or manifest.get("precision", "fp32")) == "bf16"
    main_weights = {n[len("param."):]: t.double().requires_grad_(True)
                    for n, t in tensors.items() if n.startswith("param.")}
    # What the layers compute with: the main weights, or their bf16 copies.
    params = {n: _RoundParameter.apply(p) if BF16 else p
              for n, p in main_weights.items()}

    # Dimensions come from the manifest's model section (the spec's values).
    m = spec_dims
    dims = {
        "mamba": {"heads": m["mamba_num_heads"], "head_dim": m["mamba_head_dim"],
                  "state": m["mamba_state_dim"], "groups": m["mamba_num_groups"],
                  "conv": m["mamba_conv_width"]},
        "attention": {"heads": m["num_attention_heads"], "groups": m["num_query_groups"],
                      "head_dim": m["kv_channels"], "rope": m["position_embedding"] == "rope"},
        "moe": {"experts": m["num_experts"], "topk": m["moe_router_topk"],
                "aux_coeff": m["moe_aux_loss_coeff"],
                "capacity_factor": m.get("moe_expert_capacity_factor", 0),
                "drop_policy": m.get("moe_token_drop_policy", "probs"),
                # Megatron-LM's router runs on each sequence shard.
                "capacity_blocks": (manifest["parallel"]["tp"]
                                    if manifest["parallel"].get("sequence_parallel") else 1)},
    }
    # Gated DeltaNet sizes: the manifest's model section has none, the
    # layers' kernel shapes have them.
    gdn = next((l["shape"] for st in manifest["stages"] for l in st["layers"]
                if l["kind"] == "gdn"), None)
    if gdn:
        dims["gdn"] = {"key_heads": gdn["key_heads"], "value_heads": gdn["value_heads"],
                       "key_dim": gdn["key_head_dim"], "value_dim": gdn["value_head_dim"],
                       "conv": gdn["conv_width"]}
    activation_name = m["activation"]

    def layer_params(prefix):
        return {n[len(prefix):]: t for n, t in params.items() if n.startswith(prefix)}

    layers = [(l["kind"], l["layer"]) for s in manifest["stages"] for l in s["layers"]]
    # The MTP depths run last, after the head: the main model stops there.
    if any(k == "mtp_input" for k, _ in layers):
        layers = layers[:[k for k, _ in layers].index("mtp_input")]
    kind_of = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe", "G": "gdn", "+": "mla",
               "D": "dsa"}
    # MLA's sizes and rotary settings are its layers' shapes (the manifest's
    # model section has none); the oracle's rope_type from the shape's yarn.
    dims["mla"] = next((dict(l["shape"], rope_type="yarn" if l["shape"]["yarn"] else "rope")
                        for s in manifest["stages"] for l in s["layers"]
                        if l["kind"] == "mla"), None)
    dims["dsa"] = next((dict(l["shape"], rope_type="yarn" if l["shape"]["yarn"] else "rope")
                        for s in manifest["stages"] for l in s["layers"]
                        if l["kind"] == "dsa"), None)

    def apply(kind, x, lp):
        """x + the layer of `kind` with parameters lp: new x, aux loss."""
        if kind == "mamba":
            return stored(x + mamba(stored(rmsnorm(x, lp["mixer.in_proj.layer_norm_weight"])),
                                 lp, dims["mamba"])), 0.0
        if kind == "gdn":
            return stored(x + gated_delta_net(
                stored(rmsnorm(x, lp["self_attention.in_proj.layer_norm_weight"])),
                lp, dims["gdn"])), 0.0
        if kind == "attention":
            return stored(x + attention(
                stored(rmsnorm(x, lp["self_attention.linear_qkv.layer_norm_weight"])),
                lp, dims["attention"])), 0.0
        if kind == "mla":
            return stored(x + mla(stored(rmsnorm(x, lp["input_layernorm.weight"])),
                                  lp, dims["mla"])), 0.0
        if kind == "dsa":
            y, loss = dsa(stored(rmsnorm(x, lp["input_layernorm.weight"])), lp, dims["dsa"])
            return stored(x + y), loss
        if kind == "mlp":
            return stored(x + mlp(stored(rmsnorm(x, lp["mlp.linear_fc1.layer_norm_weight"])),
                               lp, activation_name)), 0.0
        y, a = moe(stored(rmsnorm(x, lp["pre_mlp_layernorm.weight"])), lp, dims["moe"],
                   activation_name)
        return stored(x + y), a

    out_w = params["embedding.word_embeddings.weight" if spec_dims["tie_embeddings"]
                   else "output_layer.weight"]

    def logits_of(tok):
        """The model on a [batch, seq] block of token ids: logits, aux loss,
        and the normed hidden states the first MTP depth reads."""
        x = None
        aux = 0.0
        logits = h = None
        for kind, layer in layers:
            if kind == "embedding":
                # A stored activation: its gradient is rounded (bf16 rules).
                x = stored(params["embedding.word_embeddings.weight"][tok])
            elif kind == "head":
                h = stored(rmsnorm(x, params["decoder.final_norm.weight"]))
                logits = stored(h @ out_w.T)
            else:
                x, a = apply(kind, x, layer_params("decoder.layers.%d." % (layer - 1)))
                aux = aux + a
        return logits, aux, h

    def shift(t):
        """Megatron's roll_tensor(shifts=-1) on [batch, seq]: left by one, 0 in."""
        return torch.cat([t[:, 1:], torch.zeros_like(t[:, :1])], dim=1)

    def mtp_of(tok, lab, h):
        """Megatron's MTP depths (docs/model.md) on one microbatch: each
        depth's loss (a list) and their MoE aux losses."""
        losses, aux = [], 0.0
        ids, mask = tok, torch.ones_like(lab, dtype=torch.float64)
        for d in range(m.get("mtp_depths", 0)):
            ids, lab, mask = shift(ids), shift(lab), shift(mask)
            pre = "mtp.layers.%d." % d
            e = stored(params["embedding.word_embeddings.weight"][ids])
            x = torch.cat([stored(rmsnorm(e, params[pre + "enorm.weight"])),
                           stored(rmsnorm(h, params[pre + "hnorm.weight"]))], -1)
            x = stored(x @ params[pre + "eh_proj.weight"].T)
            for j, sym in enumerate(m["mtp_pattern"]):
                x, a = apply(kind_of[sym],
                             x, layer_params(pre + "mtp_model_layer.layers.%d." % j))
                aux = aux + a
            h = stored(rmsnorm(x, params[pre + "final_layernorm.weight"]))
            ce = F.cross_entropy(stored(h @ out_w.T).reshape(-1, out_w.shape[0]), lab.reshape(-1),
                                 reduction="none")
            losses.append((ce * mask.reshape(-1)).sum() / mask.sum())
        return losses, aux

    tokens, labels = tensors["tokens"].long(), tensors["labels"].long()
    total = 0.0
    lm_total = 0.0
    aux_total = 0.0
    depths = m.get("mtp_depths", 0)
    mtp_depth = [0.0] * depths  # each depth's loss, the mean over microbatches
    if "sample_starts" in tensors:
        # A packed step: each sample alone, as its own sequence; the loss is
        # the mean over the masked-in labels of all samples.
        if dims["moe"]["experts"] and layers and any(k == "moe" for k, _ in layers):
            sys.exit("the packed reference has no MoE (its aux loss is per microbatch)")
        if depths:
            sys.exit("the packed reference has no MTP")
        mask = tensors["loss_mask"].double()
        starts = tensors["sample_starts"].long().tolist() + [tokens.shape[0]]
        # Manifests older than the field trained packed steps per token.
        per_token = manifest["training"].get("calculate_per_token_loss", True)
        mb_starts = tensors["microbatch_starts"].long().tolist() + [tokens.shape[0]]
        mb_of = lambda a: max(i for i, s in enumerate(mb_starts) if s <= a)
        summed = [0.0] * (len(mb_starts) - 1)  # masked CE per microbatch
        # DSA's indexer loss: the mean over a microbatch's queries, so
        # each sample's mean times its length, over the microbatch's rows.
        aux_rows = [0.0] * (len(mb_starts) - 1)
        for a, b in zip(starts[:-1], starts[1:]):
            logits, aux, _ = logits_of(tokens[a:b][None, :])
            ce = F.cross_entropy(logits[0], labels[a:b], reduction="none")
            summed[mb_of(a)] = summed[mb_of(a)] + (ce * mask[a:b]).sum()
            aux_rows[mb_of(a)] = aux_rows[mb_of(a)] + aux * (b - a)
        # Each microbatch's aux loss weighted as its LM loss (d objective /
        # d its loss: its share of the loss tokens, or 1 / microbatches).
        bounds = list(zip(mb_starts[:-1], mb_starts[1:]))
        weights = ([mask[x:y].sum() / mask.sum() for x, y in bounds] if per_token
                   else [1.0 / len(bounds)] * len(bounds))
        aux = sum(w * r / (y - x) for w, r, (x, y) in zip(weights, aux_rows, bounds))
        if per_token:
            # --calculate-per-token-loss: the mean over every loss token.
            total = sum(summed) / mask.sum()
        else:
            # Megatron's default: the mean of the microbatches' means.
            # A microbatch with no loss token adds 0 and still counts
            # (Megatron's clamp(num_tokens, min=1)).
            means = [s / max(mask[x:y].sum(), 1) for s, (x, y)
                     in zip(summed, zip(mb_starts[:-1], mb_starts[1:]))]
            total = sum(means) / len(means)
        lm_total = float(total)
        total = total + aux
        aux_total = float(aux)
    else:
        M = tokens.shape[0]
        for mb in range(M):
            logits, aux, h = logits_of(tokens[mb])
            lm = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[mb].reshape(-1))
            mtp, mtp_aux = mtp_of(tokens[mb], labels[mb], h)
            # Megatron's objective: the MTP depths' mean weighted by
            # mtp_loss_scaling_factor, their MoE aux losses as any other.
            weight = m.get("mtp_loss_scaling_factor", 0.0) / max(depths, 1)
            total = total + (lm + aux + mtp_aux + weight * sum(mtp)) / M
            lm_total += float(lm) / M
            aux_total += float(aux + mtp_aux) / M
            for d, loss in enumerate(mtp):
                mtp_depth[d] += float(loss) / M
    if not args.batch:
        total.backward()

    worst = 0.0
    failures = []

    def check(name, got, want):
        nonlocal worst
        err = (got.double() - want).norm().item() / max(want.norm().item(), 1e-12)
        worst = max(worst, err)
        if not err <= args.tol:
            failures.append("%s: relative error %.3e" % (name, err))

    check("loss", torch.tensor(float(meta["loss"])), torch.tensor(lm_total))
    if args.batch:
        # A forward alone: the loss is all there is to compare.
        main_weights = {}
    elif aux_total != 0.0:
        check("aux_loss", torch.tensor(float(meta["aux_loss"])), torch.tensor(aux_total))
    if depths and not args.batch:
        # Each depth's loss as Megatron logs it ("mtp_1 loss", ...), and
        # the scaled total the depths add to the objective.
        for d in range(depths):
            check("mtp_%d_loss" % (d + 1), torch.tensor(float(meta["mtp_%d_loss" % (d + 1)])),
                  torch.tensor(mtp_depth[d]))
        scaled = m.get("mtp_loss_scaling_factor", 0.0) / depths * sum(mtp_depth)
        check("mtp_loss", torch.tensor(float(meta["mtp_loss"])), torch.tensor(scaled))
    unused = []
    for name, p in main_weights.items():
        if p.grad is None:
            unused.append(name)
            continue
        check("grad " + name, tensors["grad." + name], p.grad)
    if unused:
        failures.append("parameters the reference never used: " + ", ".join(unused))
    what = ("%d samples" % (len(starts) - 1) if "sample_starts" in tensors
            else "%d microbatches" % tokens.shape[0])
    if depths and not args.batch:
        what += ", %d MTP depths (losses %s, hypipe %s)" % (
            depths, " ".join("%.6f" % l for l in mtp_depth),
            " ".join(meta["mtp_%d_loss" % (d + 1)] for d in range(depths)))
    print("reference: %d parameters, %s, %s rules, loss %.6f (hypipe %s), "
          "max relative error %.2e (tolerance %.0e)"
          % (len(params), what, "bf16" if BF16 else "fp32", lm_total,
             meta["loss"], worst, args.tol))
    if dims["dsa"]:
        print("dsa: %d rows cut the top-k between equal scores" % DSA_TIES[0])
    if args.figure:
        print("@figure %s %.3e -" % (args.figure, worst))
    for f in failures:
        print("MISMATCH " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
