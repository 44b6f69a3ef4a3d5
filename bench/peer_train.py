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

The model is built by the functions below, which bench/gpu/peer_train_gpu.py
reuses with its own attention core, compilation and precision.

usage: peer_train.py ARTIFACT THREADS STEPS"""
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "test", "reference"))
import torch_reference as ref  # noqa: E402

sys.path.insert(0, here)
import fast_mamba  # noqa: E402
import fast_moe  # noqa: E402


def init_params(manifest, device="cpu"):
    """Every parameter the manifest lists, drawn in manifest order from one
    generator seeded 0 on `device` (not hypipe's initial values: the peer is
    timed, not compared). A tied embedding is listed twice; the second draw
    is the one kept."""
    g = torch.Generator(device=device).manual_seed(0)
    params = {}
    for stage in manifest["stages"]:
        for p in stage["params"]:
            if p["init"] == "ones":
                t = torch.ones(p["shape"], device=device)
            elif p["init"] == "mamba_a_log":
                t = torch.log(torch.empty(p["shape"], device=device).uniform_(1, 16, generator=g))
            elif p["init"] == "mamba_dt_bias":
                t = torch.full(p["shape"], -2.0, device=device)
            else:
                t = torch.randn(p["shape"], generator=g, device=device) * 0.02
            params[p["name"]] = t.requires_grad_(True)
    return params


def model_dims(m):
    """The layer functions' dimensions from the manifest's model object."""
    return {
        "mamba": {"heads": m["mamba_num_heads"], "head_dim": m["mamba_head_dim"],
                  "state": m["mamba_state_dim"], "groups": m["mamba_num_groups"],
                  "conv": m["mamba_conv_width"]},
        "attention": {"heads": m["num_attention_heads"], "groups": m["num_query_groups"],
                      "head_dim": m["kv_channels"],
                      "rope": m.get("position_embedding") == "rope"},
        "moe": {"experts": m["num_experts"], "topk": m["moe_router_topk"],
                "aux_coeff": m["moe_aux_loss_coeff"]},
    }


def layer_list(manifest, params):
    """(kind, that layer's parameters without their prefix) in execution
    order, from the embedding to the head."""
    layers = []
    for s in manifest["stages"]:
        for l in s["layers"]:
            prefix = "decoder.layers.%d." % (l["layer"] - 1)
            lp = {n[len(prefix):]: t for n, t in params.items() if n.startswith(prefix)}
            layers.append((l["kind"], lp))
    return layers


def blocks(m, dims, mamba=fast_mamba.mamba, attention=ref.attention, moe=fast_moe.moe):
    """kind -> block(x, lp) -> (x + the layer on the normed x, its aux loss
    or None): one residual block per layer kind."""
    act = m["activation"]

    def mamba_block(x, lp):
        return x + mamba(ref.rmsnorm(x, lp["mixer.in_proj.layer_norm_weight"]), lp,
                         dims["mamba"]), None

    def attention_block(x, lp):
        return x + attention(ref.rmsnorm(x, lp["self_attention.linear_qkv.layer_norm_weight"]),
                             lp, dims["attention"]), None

    def mlp_block(x, lp):
        return x + ref.mlp(ref.rmsnorm(x, lp["mlp.linear_fc1.layer_norm_weight"]), lp, act), None

    def moe_block(x, lp):
        y, a = moe(ref.rmsnorm(x, lp["pre_mlp_layernorm.weight"]), lp, dims["moe"], act)
        return x + y, a

    return {"mamba": mamba_block, "attention": attention_block, "mlp": mlp_block,
            "moe": moe_block}


def head_loss(x, norm_weight, out_weight, labels):
    """Final norm, output layer, mean cross-entropy over every token."""
    logits = ref.rmsnorm(x, norm_weight) @ out_weight.T
    return F.cross_entropy(logits.reshape(-1, out_weight.shape[0]), labels.reshape(-1))


def forward(params, layers, block_of, head, tokens, labels):
    """The model's loss (cross-entropy plus the MoE aux losses)."""
    x, aux = None, 0.0
    for kind, lp in layers:
        if kind == "embedding":
            x = params["embedding.word_embeddings.weight"][tokens]
        elif kind == "head":
            out = params.get("output_layer.weight", params["embedding.word_embeddings.weight"])
            return head(x, params["decoder.final_norm.weight"], out, labels) + aux
        else:
            x, a = block_of[kind](x, lp)
            if a is not None:
                aux = aux + a


def batch(data, B, S, i):
    """Step i's tokens and labels: B windows of S + 1 bytes of `data` at
    offsets drawn from a generator seeded i."""
    gen = torch.Generator().manual_seed(i)
    off = torch.randint(0, len(data) - S - 1, (B,), generator=gen)
    rows = torch.stack([torch.tensor(list(data[o:o + S + 1])) for o in off.tolist()])
    return rows[:, :-1], rows[:, 1:]


def main():
    artifact, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    manifest = json.load(open(artifact + "/manifest.json"))
    m = manifest["model"]
    tr = manifest["training"]
    B, S = tr["micro_batch_size"], tr["seq_length"]
    params = init_params(manifest)
    layers = layer_list(manifest, params)
    block_of = blocks(m, model_dims(m))
    opt = torch.optim.AdamW(params.values(), lr=1e-3, foreach=True)
    data = open(manifest["data"]["path"], "rb").read()

    # One warm-up step, then the timed ones.
    times = []
    for i in range(steps + 1):
        tokens, labels = batch(data, B, S, i)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = forward(params, layers, block_of, head_loss, tokens, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        if i > 0:
            times.append(time.perf_counter() - t0)
    n = sum(p.numel() for p in params.values())
    print("%.1f %d" % (B * S * steps / sum(times), n))


if __name__ == "__main__":
    main()
