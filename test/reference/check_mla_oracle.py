"""The float64 MLA of torch_reference.py against transformers' DeepseekV3Attention.

Megatron-LM's MLASelfAttention with qk_layernorm is DeepSeek-V3's attention
under other names (q_a_proj <-> linear_q_down_proj, q_a_layernorm <->
linear_q_up_proj.layer_norm_weight, q_b_proj <-> linear_q_up_proj, q_proj <->
linear_q_proj, kv_a_proj_with_mqa <-> linear_kv_down_proj, kv_a_layernorm <->
linear_kv_up_proj.layer_norm_weight, kv_b_proj <-> linear_kv_up_proj, o_proj
<-> linear_proj); without qk_layernorm Megatron's latent norms are
identities, and so are transformers' here. Both run in float64 on the same weights and input, with
q_lora_rank on and off, qk_layernorm on and off, and RoPE and YaRN; the output and every gradient
(the input's and each weight's) must agree to 1e-10 relative to the
tensor's largest entry, on the same rotary angles; the angles' frequencies
and the factor on cos and sin (YaRN's) are compared on their own, the
frequencies to 1e-6: transformers computes them in float32, as Megatron
does. Prints one line per case, MISMATCH where one does not agree.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

from transformers import DeepseekV3Config  # noqa: E402
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds  # noqa: E402

# transformers' RMSNorm computes in float32 whatever its input; here it
# keeps float64 (the same formula).
ds.DeepseekV3RMSNorm.forward = lambda self, x: (
    x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon) * self.weight)

NAMES = {
    "q_a_proj.weight": "self_attention.linear_q_down_proj.weight",
    "q_a_layernorm.weight": "self_attention.linear_q_up_proj.layer_norm_weight",
    "q_b_proj.weight": "self_attention.linear_q_up_proj.weight",
    "q_proj.weight": "self_attention.linear_q_proj.weight",
    "kv_a_proj_with_mqa.weight": "self_attention.linear_kv_down_proj.weight",
    "kv_a_layernorm.weight": "self_attention.linear_kv_up_proj.layer_norm_weight",
    "kv_b_proj.weight": "self_attention.linear_kv_up_proj.weight",
    "o_proj.weight": "self_attention.linear_proj.weight",
}


def check(name, d, B=2, S=11, hidden=32):
    torch.manual_seed(0)
    rope = {"rope_type": "default", "rope_theta": 10000.0}
    if d["rope_type"] == "yarn":
        f = d["rotary_scaling_factor"]
        rope = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": f,
                "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                "beta_slow": 1.0, "mscale": d["mscale"],
                "mscale_all_dim": d["mscale_all_dim"]}
    config = DeepseekV3Config(
        hidden_size=hidden, num_attention_heads=d["heads"],
        num_key_value_heads=d["heads"], q_lora_rank=d["q_lora_rank"] or None,
        kv_lora_rank=d["kv_lora_rank"], qk_nope_head_dim=d["qk_head_dim"],
        qk_rope_head_dim=d["qk_pos_emb_head_dim"], v_head_dim=d["v_head_dim"],
        rope_parameters=rope, rope_interleave=True, attention_bias=False,
        rms_norm_eps=ref.EPS, max_position_embeddings=int(4096 * d.get("rotary_scaling_factor", 1.0)))
    config._attn_implementation = "sdpa"  # eager takes its softmax in float32
    hf = ds.DeepseekV3Attention(config, layer_idx=0).double()
    # Its latent norms take the default epsilon, not the config's:
    # Megatron's (hypipe's) is the layer norm epsilon.
    # Without qk_layernorm Megatron's latent norms are IdentityOp.
    for m in hf.modules():
        if isinstance(m, ds.DeepseekV3RMSNorm):
            m.variance_epsilon = ref.EPS
            if not d["qk_layernorm"]:
                m.forward = lambda x: x
    with torch.no_grad():
        for p in hf.parameters():
            p.copy_(torch.randn_like(p) * 0.3 + (1.0 if p.dim() == 1 else 0.0))
    used = [(k, v) for k, v in hf.named_parameters() if d["qk_layernorm"] or "layernorm" not in k]
    ours = {NAMES[k]: v.detach().clone().requires_grad_(True) for k, v in used}

    x = torch.randn(B, S, hidden, dtype=torch.float64)
    x_hf, x_ours = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    # The rotary frequencies and the factor on cos and sin: transformers'
    # (float32 frequencies, as Megatron's) against ours (float64).
    rotary = ds.DeepseekV3RotaryEmbedding(config)
    inv, factor = rotary.inv_freq.double(), rotary.attention_scaling
    ang, our_factor = ref.mla_rotary(S, d)
    freq_err = ((ang[1] - inv).abs() / inv).max().item()
    if not freq_err <= 1e-6 or abs(our_factor - factor) > 1e-12 * factor:
        print(f"MISMATCH {name}: rotary frequencies {freq_err:.3g} apart, factor {our_factor} vs {factor}")
    # The layer on the same (our float64) angles.
    emb = torch.cat([ang, ang], -1)[None]
    mask = torch.full((S, S), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    y_hf = hf(x_hf, (emb.cos() * factor, emb.sin() * factor), mask)[0]
    y_ours = ref.mla(x_ours, ours, d)

    dy = torch.randn_like(y_hf)
    y_hf.backward(dy)
    y_ours.backward(dy)
    pairs = [("output", y_hf.detach(), y_ours.detach()), ("input grad", x_hf.grad, x_ours.grad)]
    pairs += [(NAMES[k] + " grad", v.grad, ours[NAMES[k]].grad) for k, v in used]
    worst = 0.0
    for what, a, b in pairs:
        err = ((a - b).abs().max() / a.abs().max()).item()
        worst = max(worst, err)
        if not err <= 1e-10:
            print(f"MISMATCH {name}: {what} relative error {err:.3g}")
    print(f"mla oracle {name}: {len(pairs)} tensors, worst relative error {'below' if worst <= 1e-10 else 'ABOVE'} 1e-10")


def main():
    base = {"heads": 4, "kv_lora_rank": 12, "qk_head_dim": 6, "qk_pos_emb_head_dim": 8,
            "v_head_dim": 5, "qk_layernorm": True}
    check("q_lora rope", dict(base, q_lora_rank=10, rope_type="rope",
                               rotary_scaling_factor=1.0, mscale=1.0, mscale_all_dim=0.0))
    check("no q_lora rope", dict(base, q_lora_rank=0, rope_type="rope",
                                  rotary_scaling_factor=1.0, mscale=1.0, mscale_all_dim=0.0))
    check("q_lora yarn", dict(base, q_lora_rank=10, rope_type="yarn",
                               rotary_scaling_factor=40.0, mscale=0.707, mscale_all_dim=0.707))
    check("no q_lora yarn", dict(base, q_lora_rank=0, rope_type="yarn",
                                  rotary_scaling_factor=4.0, mscale=1.0, mscale_all_dim=1.0))
    check("q_lora yarn without qk_layernorm", dict(
        base, qk_layernorm=False, q_lora_rank=10, rope_type="yarn",
        rotary_scaling_factor=4.0, mscale=1.0, mscale_all_dim=0.0))


if __name__ == "__main__":
    main()
