#!/usr/bin/python3
"""Checks the float64 Gated DeltaNet of torch_reference.py (a token-at-a-time
recurrence under Megatron-LM's parameter names) against Hugging Face
transformers' Qwen3NextGatedDeltaNet (its chunked torch path, float32), on
random weights mapped from Megatron's blocked in_proj [q k v z beta alpha]
to Qwen3-Next's per-key-head groups: a batch of two sequences longer than
two chunks of 64, and a packed microbatch whose samples run one by one in
transformers. Prints the largest relative error of each and exits 1 past
--tol.

usage: check_gdn_oracle.py [--tol 1e-4]
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig  # noqa: E402
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet  # noqa: E402

H, NK, NV, DK, DV, K = 16, 2, 4, 8, 6, 4


def megatron_params(gen):
    rows = 2 * NK * DK + 2 * NV * DV + 2 * NV
    r = lambda *shape, scale=1.0: torch.randn(*shape, generator=gen, dtype=torch.float64) * scale
    return {
        "self_attention.in_proj.weight": r(rows, H, scale=0.3),
        "self_attention.conv1d.weight": r(2 * NK * DK + NV * DV, 1, K, scale=0.5),
        "self_attention.dt_bias": 1.0 + r(NV, scale=0.1),
        "self_attention.A_log": torch.log(torch.rand(NV, generator=gen, dtype=torch.float64) * 15 + 1),
        "self_attention.out_norm.weight": 1.0 + r(DV, scale=0.1),
        "self_attention.out_proj.weight": r(H, NV * DV, scale=0.3),
    }


def to_transformers(p):
    """Megatron's blocked rows to Qwen3-Next's groups per key head: in_proj_qkvz
    [q_i k_i v_i z_i] and in_proj_ba [b_i a_i], i over key heads, v_i, z_i,
    b_i and a_i that head's nv / nk value heads."""
    w = p["self_attention.in_proj.weight"]
    q, k, v, z, b, a = torch.split(w, [NK * DK, NK * DK, NV * DV, NV * DV, NV, NV])
    r = NV // NK
    qkvz = torch.cat([torch.cat([q[i * DK:(i + 1) * DK], k[i * DK:(i + 1) * DK],
                                 v[i * r * DV:(i + 1) * r * DV], z[i * r * DV:(i + 1) * r * DV]])
                      for i in range(NK)])
    ba = torch.cat([torch.cat([b[i * r:(i + 1) * r], a[i * r:(i + 1) * r]]) for i in range(NK)])
    return {"in_proj_qkvz.weight": qkvz, "in_proj_ba.weight": ba,
            "conv1d.weight": p["self_attention.conv1d.weight"],
            "dt_bias": p["self_attention.dt_bias"], "A_log": p["self_attention.A_log"],
            "norm.weight": p["self_attention.out_norm.weight"],
            "out_proj.weight": p["self_attention.out_proj.weight"]}


def rel(a, b):
    return float((a - b).norm() / b.norm())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()
    gen = torch.Generator().manual_seed(51)
    p = megatron_params(gen)
    config = Qwen3NextConfig(hidden_size=H, linear_num_key_heads=NK, linear_num_value_heads=NV,
                             linear_key_head_dim=DK, linear_value_head_dim=DV,
                             linear_conv_kernel_dim=K, rms_norm_eps=ref.EPS, hidden_act="silu",
                             num_hidden_layers=1, layer_types=["linear_attention"])
    hf = Qwen3NextGatedDeltaNet(config, 0).double()
    hf.load_state_dict({n: t.float().double() for n, t in to_transformers(p).items()})
    dims = {"key_heads": NK, "value_heads": NV, "key_dim": DK, "value_dim": DV, "conv": K}

    failures = 0
    x = torch.randn(2, 150, H, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        ours = ref.gated_delta_net(x, p, dims)
        theirs = hf(x)
        err = rel(ours, theirs)
        print("batch of 2 x 150 tokens: relative error (norm-wise) %.3g" % err)
        failures += err > args.tol

        # Packed: samples of 70 and 80 tokens in one row; transformers runs
        # each alone (the state and the conv restart at the boundary).
        ours = ref.gated_delta_net(x[:1], p, dims, cu_seqlens=[0, 70, 150])
        theirs = torch.cat([hf(x[:1, :70]), hf(x[:1, 70:])], dim=1)
        err = rel(ours, theirs)
        print("packed 70 + 80 tokens: relative error (norm-wise) %.3g" % err)
        failures += err > args.tol
        # Unpacked, the second sample would read the first's state.
        err = rel(ref.gated_delta_net(x[:1], p, dims), theirs)
        print("the same row unpacked: relative error (norm-wise) %.3g" % err)
        failures += err < args.tol
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
