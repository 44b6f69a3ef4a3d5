#!/usr/bin/env python3
"""A model made and saved by Hugging Face transformers itself
(`...ForCausalLM(config).save_pretrained`, float32 safetensors), with the
dimensions of a hypipe artifact's model: what `hypipe ckpt import` must read
as a user's transformers checkpoint. A pattern of Mamba and attention layers
is a NemotronH, one of Gated DeltaNet layers each followed by an MLP
('G-G-') a Qwen3-Next. The weights are transformers' own initialisation,
with a seed; Qwen3-Next's (zero) decoder norms, gated norms, A_log and
dt_bias are then drawn at random too, so that no mapping of them hides
behind a constant.

--layer-types and --num-experts change a Qwen3-Next's config from what
hypipe computes (full attention layers, MoE) to test the import's refusals.

usage: hf_save_model.py MANIFEST OUT_DIR [--seed N]
                        [--layer-types T,T,...] [--num-experts N]"""
import argparse
import json

import torch


def nemotron_h(m):
    from transformers import NemotronHConfig, NemotronHForCausalLM
    activation = {"squared_relu": "relu2", "gelu": "gelu"}[m["activation"]]
    config = NemotronHConfig(
        vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
        hybrid_override_pattern=m["pattern"].replace("|", ""),
        num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_query_groups"], head_dim=m["kv_channels"],
        intermediate_size=m["ffn_hidden_size"], mlp_hidden_act=activation,
        mamba_num_heads=m["mamba_num_heads"], mamba_head_dim=m["mamba_head_dim"],
        ssm_state_size=m["mamba_state_dim"], n_groups=m["mamba_num_groups"],
        conv_kernel=m["mamba_conv_width"], layer_norm_epsilon=1e-5,
        tie_word_embeddings=m["tie_embeddings"], use_mamba_kernels=False)
    return NemotronHForCausalLM(config).float()


def qwen3_next(m, gdn, args):
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM
    n = len(m["pattern"].replace("|", "")) // 2
    layer_types = (args.layer_types.split(",") if args.layer_types
                   else ["linear_attention"] * n)
    # Dense MLPs: no experts (Qwen3-Next's default is 512 of them).
    config = Qwen3NextConfig(
        vocab_size=m["vocab_size"], hidden_size=m["hidden_size"],
        intermediate_size=m["ffn_hidden_size"], num_hidden_layers=n,
        layer_types=layer_types, num_experts=args.num_experts,
        moe_intermediate_size=m["ffn_hidden_size"],
        shared_expert_intermediate_size=m["ffn_hidden_size"],
        num_experts_per_tok=1,
        linear_num_key_heads=gdn["key_heads"], linear_num_value_heads=gdn["value_heads"],
        linear_key_head_dim=gdn["key_head_dim"], linear_value_head_dim=gdn["value_head_dim"],
        linear_conv_kernel_dim=gdn["conv_width"], num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, rms_norm_eps=1e-5,
        tie_word_embeddings=m["tie_embeddings"], use_cache=False)
    model = Qwen3NextForCausalLM(config).float()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("layernorm.weight", "model.norm.weight")):
                p.normal_(0.0, 0.2)  # zero-centred: computes (1 + w)
            elif name.endswith("linear_attn.norm.weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("A_log"):
                p.uniform_(-1.0, 1.0)
            elif name.endswith("dt_bias"):
                p.uniform_(-0.5, 1.5)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("manifest")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layer-types", default=None)
    ap.add_argument("--num-experts", type=int, default=0)
    args = ap.parse_args()
    manifest = json.load(open(args.manifest))
    m = manifest["model"]
    gdn = [layer["shape"] for stage in manifest["stages"] for layer in stage["layers"]
           if layer["kind"] == "gdn"]
    torch.manual_seed(args.seed)
    model = qwen3_next(m, gdn[0], args) if gdn else nemotron_h(m)
    model.save_pretrained(args.out, safe_serialization=True)
    print("saved %s: %d parameters, layers %s (%s)" % (
        args.out, sum(p.numel() for p in model.parameters()),
        "".join(m["pattern"].split("|")), model.__class__.__name__))


if __name__ == "__main__":
    main()
