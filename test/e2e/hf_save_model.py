#!/usr/bin/env python3
"""A NemotronH model made and saved by Hugging Face transformers itself
(`NemotronHForCausalLM(config).save_pretrained`), with the dimensions of a
hypipe artifact's model: what `hypipe ckpt import` must read as a user's
transformers checkpoint. Its weights are transformers' own initialisation,
with a seed.

usage: hf_save_model.py MANIFEST OUT_DIR [--seed N]"""
import argparse
import json

import torch
from transformers import NemotronHConfig, NemotronHForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("manifest")
ap.add_argument("out")
ap.add_argument("--seed", type=int, default=0)
args = ap.parse_args()
m = json.load(open(args.manifest))["model"]
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
torch.manual_seed(args.seed)
model = NemotronHForCausalLM(config).float()
model.save_pretrained(args.out)
print("saved %s: %d parameters, layers %s" % (
    args.out, sum(p.numel() for p in model.parameters()), "".join(m["pattern"].split("|"))))
