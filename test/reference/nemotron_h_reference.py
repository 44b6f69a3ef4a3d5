#!/usr/bin/python3
"""A Hugging Face NemotronH checkpoint (what `hypipe ckpt export --format hf`
writes) evaluated on a batch hypipe trained on, in float64 PyTorch, with the
block structure of transformers' NemotronH: every block is
`h + mixer(norm(h))`, the Mamba-2 mixer splits in_proj into [gate | xBC |
dt] and normalises y * silu(gate) per group, attention has separate
q/k/v projections with key-value heads repeated and no position embedding,
the MLP is down_proj(relu2(up_proj(x))), then norm_f and lm_head (the
embedding when tie_word_embeddings). Dimensions come from config.json
alone. Compares the mean cross-entropy with the loss hypipe computed for
the same parameters and batch (a `hypipe-run --dump-step` file).

With --transformers, loads the directory with transformers'
AutoModelForCausalLM instead and compares its loss the same way; exits 77
(skipped) when transformers is not installed. With --logits-tol T as well,
transformers' model is also loaded in float64 and its logits on every
microbatch compared with the float64 NemotronH blocks' (the largest absolute
difference over the largest absolute logit): what transformers computes
from the config.json hypipe wrote must be what hypipe computes, not only on
average.

usage: nemotron_h_reference.py HF_DIR DUMP [--tol 1e-5] [--transformers]
                               [--logits-tol T]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from torch_reference import EPS, load_safetensors, sequential_scan  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def rmsnorm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


def mamba_mixer(x, p, c):
    B, S, _ = x.shape
    H, P, N = c["mamba_num_heads"], c["mamba_head_dim"], c["ssm_state_size"]
    G, K = c["n_groups"], c["conv_kernel"]
    I = H * P
    gate, xbc, dt = torch.split(x @ p["in_proj.weight"].T, [I, I + 2 * G * N, H], dim=-1)
    conv = F.conv1d(xbc.transpose(1, 2), p["conv1d.weight"], p["conv1d.bias"],
                    padding=K - 1, groups=I + 2 * G * N)
    xbc = F.silu(conv[..., :S].transpose(1, 2))
    xs, Bm, Cm = torch.split(xbc, [I, G * N, G * N], dim=-1)
    xs = xs.reshape(B, S, H, P)
    Bm = Bm.reshape(B, S, G, N).repeat_interleave(H // G, dim=2)
    Cm = Cm.reshape(B, S, G, N).repeat_interleave(H // G, dim=2)
    dt = F.softplus(dt + p["dt_bias"])
    y = sequential_scan(xs, dt, -torch.exp(p["A_log"]), Bm, Cm)
    y = (y + p["D"][None, None, :, None] * xs).reshape(B, S, I)
    # MambaRMSNormGated, group_size = I / n_groups, gate applied first.
    g = (y * F.silu(gate)).reshape(B, S, G, I // G)
    g = (g * torch.rsqrt(g.pow(2).mean(-1, keepdim=True) + EPS)).reshape(B, S, I)
    return (g * p["norm.weight"]) @ p["out_proj.weight"].T


def attention_mixer(x, p, c):
    B, S, _ = x.shape
    H, KV, D = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    q = (x @ p["q_proj.weight"].T).reshape(B, S, H, D).transpose(1, 2)
    k = (x @ p["k_proj.weight"].T).reshape(B, S, KV, D).transpose(1, 2)
    v = (x @ p["v_proj.weight"].T).reshape(B, S, KV, D).transpose(1, 2)
    k = k.repeat_interleave(H // KV, dim=1)
    v = v.repeat_interleave(H // KV, dim=1)
    # transformers' eager attention: scores scaled by head_dim ** -0.5, a
    # causal mask, softmax over keys.
    s = (q @ k.transpose(-1, -2)) * D ** -0.5
    s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
    ctx = s.softmax(-1) @ v
    return ctx.transpose(1, 2).reshape(B, S, H * D) @ p["o_proj.weight"].T


def mlp_mixer(x, p, c):
    up = x @ p["up_proj.weight"].T
    act = F.relu(up).pow(2) if c["mlp_hidden_act"] == "relu2" else F.gelu(up)
    return act @ p["down_proj.weight"].T


def load_hf(directory):
    config = json.load(open(os.path.join(directory, "config.json")))
    index = json.load(open(os.path.join(directory, "model.safetensors.index.json")))
    weights = {}
    for file in sorted(set(index["weight_map"].values())):
        tensors, _ = load_safetensors(os.path.join(directory, file))
        weights.update({k: v.double() for k, v in tensors.items()})
    return config, weights


def logits(config, w, tokens):
    h = w["backbone.embeddings.weight"][tokens]
    mixers = {"M": mamba_mixer, "*": attention_mixer, "-": mlp_mixer}
    for i, kind in enumerate(config["hybrid_override_pattern"]):
        pre = "backbone.layers.%d." % i
        p = {k[len(pre) + len("mixer."):]: v for k, v in w.items()
             if k.startswith(pre + "mixer.")}
        h = h + mixers[kind](rmsnorm(h, w[pre + "norm.weight"]), p, config)
    h = rmsnorm(h, w["backbone.norm_f.weight"])
    head = w["backbone.embeddings.weight" if config["tie_word_embeddings"] else "lm_head.weight"]
    return h @ head.T


def compare_logits(args, tokens):
    """transformers' float64 logits against the float64 NemotronH blocks'."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(
        args.hf_dir, dtype=torch.float64, trust_remote_code=False).eval()
    config, weights = load_hf(args.hf_dir)
    worst = 0.0
    with torch.no_grad():
        for t in tokens:
            ours = logits(config, weights, t)
            theirs = model(input_ids=t).logits
            worst = max(worst, float((theirs - ours).abs().max() / ours.abs().max()))
    ok = worst <= args.logits_tol
    print("transformers float64 logits vs the float64 NemotronH blocks: largest difference "
          "%.2g of the largest logit (%s %g)" % (worst, "within" if ok else "ABOVE",
                                                  args.logits_tol))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("dump")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--transformers", action="store_true")
    ap.add_argument("--logits-tol", type=float, default=None)
    args = ap.parse_args()
    dump, meta = load_safetensors(args.dump)
    tokens, labels = dump["tokens"].long(), dump["labels"].long()  # [m, b, s]
    want = float(meta["loss"])
    if args.transformers:
        try:
            from transformers import AutoModelForCausalLM
        except ImportError:
            print("transformers is not installed: skipped")
            sys.exit(77)
        model = AutoModelForCausalLM.from_pretrained(
            args.hf_dir, dtype=torch.float32, trust_remote_code=False).eval()
        with torch.no_grad():
            per_mb = [F.cross_entropy(model(input_ids=t).logits.double().flatten(0, 1),
                                      l.flatten()) for t, l in zip(tokens, labels)]
        source = "transformers %s" % model.__class__.__name__
        if args.logits_tol is not None and not compare_logits(args, tokens):
            sys.exit(1)
    else:
        config, weights = load_hf(args.hf_dir)
        with torch.no_grad():
            per_mb = [F.cross_entropy(logits(config, weights, t).flatten(0, 1), l.flatten())
                      for t, l in zip(tokens, labels)]
        source = "float64 NemotronH blocks"
    got = float(torch.stack(per_mb).mean())
    rel = abs(got - want) / abs(want)
    print("%s: loss %.7f, hypipe %.7f, relative difference %.2g (%s %g)"
          % (source, got, want, rel, "within" if rel <= args.tol else "ABOVE", args.tol))
    sys.exit(0 if rel <= args.tol else 1)


if __name__ == "__main__":
    main()
