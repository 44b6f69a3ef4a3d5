#!/usr/bin/python3
"""Peer for bench/run_train.sh: the same model trained by eager PyTorch on
CPU, in float32, same shapes, AdamW, same thread count, written for speed as
a PyTorch user without custom kernels writes it: Mamba-2's scan in its
chunked SSD form (bench/fast_mamba.py: batched matmuls per chunk, states
passed between chunks only; test/e2e/fast-peer.test shows it is the same
function as the reference's per-step recurrence), the other layers as in
test/reference/torch_reference.py (GEMMs, einsum attention: PyTorch 1.13 has
no fused attention), except MoE: experts run on their routed rows only
(bench/fast_moe.py, checked by the same test), AdamW with foreach. Prints: tokens_per_s params.

usage: peer_train.py ARTIFACT THREADS STEPS"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "test", "reference"))
import torch_reference as ref  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import fast_mamba  # noqa: E402
import fast_moe  # noqa: E402

artifact, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
import json  # noqa: E402

manifest = json.load(open(artifact + "/manifest.json"))
m = manifest["model"]
tr = manifest["training"]
B, S = tr["micro_batch_size"], tr["seq_length"]
g = torch.Generator().manual_seed(0)
params = {}
for stage in manifest["stages"]:
    for p in stage["params"]:
        if p["init"] == "ones":
            t = torch.ones(p["shape"])
        elif p["init"] == "mamba_a_log":
            t = torch.log(torch.empty(p["shape"]).uniform_(1, 16, generator=g))
        elif p["init"] == "mamba_dt_bias":
            t = torch.full(p["shape"], -2.0)
        else:
            t = torch.randn(p["shape"], generator=g) * 0.02
        params[p["name"]] = t.requires_grad_(True)
dims = {
    "mamba": {"heads": m["mamba_num_heads"], "head_dim": m["mamba_head_dim"],
              "state": m["mamba_state_dim"], "groups": m["mamba_num_groups"],
              "conv": m["mamba_conv_width"]},
    "attention": {"heads": m["num_attention_heads"], "groups": m["num_query_groups"],
                  "head_dim": m["kv_channels"], "rope": False},
    "moe": {"experts": m["num_experts"], "topk": m["moe_router_topk"],
            "aux_coeff": m["moe_aux_loss_coeff"]},
}
layers = [(l["kind"], l["layer"]) for s in manifest["stages"] for l in s["layers"]]
opt = torch.optim.AdamW(params.values(), lr=1e-3, foreach=True)
data = open(manifest["data"]["path"], "rb").read()


def forward(tokens, labels):
    x, aux = None, 0.0
    for kind, layer in layers:
        lp = {n[len("decoder.layers.%d." % (layer - 1)):]: t for n, t in params.items()
              if n.startswith("decoder.layers.%d." % (layer - 1))}
        if kind == "embedding":
            x = params["embedding.word_embeddings.weight"][tokens]
        elif kind == "mamba":
            x = x + fast_mamba.mamba(ref.rmsnorm(x, lp["mixer.in_proj.layer_norm_weight"]), lp, dims["mamba"])
        elif kind == "attention":
            x = x + ref.attention(ref.rmsnorm(x, lp["self_attention.linear_qkv.layer_norm_weight"]),
                                  lp, dims["attention"])
        elif kind == "mlp":
            x = x + ref.mlp(ref.rmsnorm(x, lp["mlp.linear_fc1.layer_norm_weight"]), lp, m["activation"])
        elif kind == "moe":
            y, a = fast_moe.moe(ref.rmsnorm(x, lp["pre_mlp_layernorm.weight"]), lp, dims["moe"], m["activation"])
            x, aux = x + y, aux + a
        elif kind == "head":
            h = ref.rmsnorm(x, params["decoder.final_norm.weight"])
            out = params.get("output_layer.weight", params["embedding.word_embeddings.weight"])
            logits = h @ out.T
            return torch.nn.functional.cross_entropy(logits.reshape(-1, m["vocab_size"]),
                                                     labels.reshape(-1)) + aux


def batch(i):
    gen = torch.Generator().manual_seed(i)
    off = torch.randint(0, len(data) - S - 1, (B,), generator=gen)
    rows = torch.stack([torch.tensor(list(data[o:o + S + 1])) for o in off.tolist()])
    return rows[:, :-1], rows[:, 1:]


# One warm-up step, then the timed ones.
times = []
for i in range(steps + 1):
    tokens, labels = batch(i)
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = forward(tokens, labels)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
    opt.step()
    if i > 0:
        times.append(time.perf_counter() - t0)
n = sum(p.numel() for p in params.values())
print("%.1f %d" % (B * S * steps / sum(times), n))
