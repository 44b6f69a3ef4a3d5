"""The float64 DSA of torch_reference.py against Megatron-LM's own code.

Megatron-core's DSA (transformer/experimental_attention_variant/dsa.py) is
plain PyTorch and runs on the CPU in float64: its DSAIndexer (built with
bias-free linears, a LayerNorm k_norm and its own RoPE or YaRN), its
compute_dsa_indexer_loss and its unfused_dsa_fn are compared with the
reference's dsa_index_scores, dsa_indexer_loss and dsa_attention on the same
weights, inputs and top-k keys: the index scores, the loss, the attention's
output, and the gradients of the indexer's weights (through the loss) and
of query, key and value (through the attention), to 1e-10 relative to each
tensor's norm. The Hadamard rotation is left out on both sides (Megatron's
needs bf16 and the fast_hadamard_transform package; it is orthonormal and
changes no score). Cases: RoPE and YaRN, a query latent and none (the
indexer then reads the normed input), top-k below and above the sequence
length, the dense and the sparse loss; Megatron's float32 casts are made no-ops, so both compute in
float64. Then the top-k rule on exact ties:
the lower key index wins, which torch.topk leaves open. Prints one line per
case, MISMATCH where one does not agree.
"""
import os
import sys
import types
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

warnings.filterwarnings("ignore")
# Megatron's YarnRotaryEmbedding places its buffers on the current CUDA
# device unless told otherwise, and DSAIndexer does not tell it.
torch.cuda.current_device = lambda: "cpu"
from megatron.core.transformer.experimental_attention_variant import dsa as mdsa  # noqa: E402
from megatron.core.transformer.transformer_config import MLATransformerConfig  # noqa: E402

mdsa.rotate_activation = lambda t: t
# Megatron computes the scores, the loss and the attention in float32
# (.float(), softmax(dtype=float32)) whatever its inputs; here those casts
# keep float64, so the formulas are compared and not float32's rounding
# (which also reorders near-equal scores in the top-k).
torch.Tensor.float = lambda self: self
_softmax = torch.nn.functional.softmax
torch.nn.functional.softmax = lambda x, dim=None, dtype=None, **kw: _softmax(x, dim=dim, **kw)
TOL = 1e-10
failures = []


class Linear(torch.nn.Module):
    """Megatron's bias-free linear (backend.linear()): (y, None)."""

    def __init__(self, in_features, out_features, **_):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features, dtype=torch.float64) * 0.3)

    def forward(self, x):
        return x @ self.weight.T, None


class LayerNorm(torch.nn.Module):
    """backend.layer_norm(rms_norm=False): weight and bias."""

    def __init__(self, config, hidden_size, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(1 + 0.2 * torch.randn(hidden_size, dtype=torch.float64))
        self.bias = torch.nn.Parameter(0.2 * torch.randn(hidden_size, dtype=torch.float64))
        self.eps = eps

    def forward(self, x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)


class Group:
    def size(self):
        return 1

    def rank(self):
        return 0


def rel(a, b):
    return (a - b).norm().item() / max(b.norm().item(), 1e-300)


def case(name, yarn, q_lora, topk, sparse, B=2, S=9, hidden=16, heads=3):
    torch.manual_seed(len(name))
    qk, pe, v, nI, dI = 4, 4, 5, 2, 8
    cfg = MLATransformerConfig(
        num_layers=1, hidden_size=hidden, num_attention_heads=heads, q_lora_rank=q_lora,
        kv_lora_rank=6, qk_head_dim=qk, qk_pos_emb_head_dim=pe, v_head_dim=v,
        rope_type="yarn" if yarn else "rope", rotary_scaling_factor=4.0 if yarn else 1.0,
        mscale=0.9, mscale_all_dim=0.7, apply_rope_fusion=False, dsa_indexer_n_heads=nI,
        dsa_indexer_head_dim=dI, dsa_indexer_topk=topk, dsa_indexer_loss_coeff=0.3,
        dsa_indexer_use_sparse_loss=sparse, experimental_attention_variant="dsa",
        normalization="RMSNorm", add_bias_linear=False, params_dtype=torch.float64,
        use_cpu_initialization=True)
    groups = types.SimpleNamespace(tp=Group(), cp=Group())
    indexer = mdsa.DSAIndexer(cfg, mdsa.DSAIndexerSubmodules(
        linear_wq_b=Linear, linear_wk=Linear, k_norm=LayerNorm, linear_weights_proj=Linear),
        pg_collection=groups)
    x = torch.randn(B, S, hidden, dtype=torch.float64)
    qr = torch.randn(B, S, q_lora, dtype=torch.float64) if q_lora else x
    d = {"dsa_indexer_n_heads": nI, "dsa_indexer_head_dim": dI, "qk_pos_emb_head_dim": pe,
         "rope_type": "yarn" if yarn else "rope", "rotary_scaling_factor": cfg.rotary_scaling_factor,
         "mscale": cfg.mscale, "mscale_all_dim": cfg.mscale_all_dim}
    i = "self_attention.core_attention.indexer."
    # The reference reads the same tensors under Megatron's names (as in a
    # checkpoint); the gradients reach the same leaves.
    p = {i + n: t for n, t in indexer.named_parameters()}
    p[i + "k_norm.weight"], p[i + "k_norm.bias"] = indexer.k_norm.weight, indexer.k_norm.bias
    # Megatron's rotary angles for both (its frequencies, float32, made
    # float64 so that the angles and their cos and sin are); the
    # reference's own float64 frequencies to 1e-6 on their own.
    for buffer in ("inv_freq", "inv_freq_extra", "inv_freq_inter"):  # RoPE's, YaRN's
        if hasattr(indexer.rotary_pos_emb, buffer):
            setattr(indexer.rotary_pos_emb, buffer, getattr(indexer.rotary_pos_emb, buffer).double())
    emb = indexer.rotary_pos_emb(S)
    emb, factor = emb if yarn else (emb, 1.0)
    ang = emb[:, 0, 0, :pe // 2].double()
    own, own_factor = ref.mla_rotary(S, d)
    if not (rel(own, ang) <= 1e-6 and abs(own_factor - factor) <= 1e-6 * abs(factor)):
        failures.append("%s: the rotary angles differ from Megatron's" % name)
    rotary = (ang, factor)
    mask = torch.triu(torch.full((S, S), float("-inf"), dtype=torch.float64), diagonal=1)

    # Megatron: [s, b, ...]; the reference [b, s, ...].
    want_scores, top = indexer.forward_with_scores(x.transpose(0, 1), qr.transpose(0, 1), mask=mask)
    got_scores = ref.dsa_index_scores(x, qr, p, d, rotary)
    finite = torch.isfinite(want_scores)
    errors = {"index scores": rel(got_scores[finite], want_scores[finite])}
    if not torch.equal(torch.isfinite(got_scores), finite):
        failures.append("%s: the masked index scores differ" % name)
    keep = ref.dsa_topk(got_scores.detach(), topk)
    # Megatron's torch.topk may order equal scores either way (ReLU makes
    # exact zeros common): its keys' scores must be the reference's.
    kept_scores = lambda k: torch.sort(got_scores.detach().masked_fill(~k, 0), -1).values
    megatron_keep = torch.zeros_like(keep).scatter_(-1, top, True) & ~ref.causal_mask(S)
    if not torch.equal(kept_scores(keep), kept_scores(megatron_keep)):
        failures.append("%s: the top-k keys' scores differ from Megatron's" % name)
    # Megatron's functions then take the reference's keys, as indices.
    top = torch.sort(got_scores.detach(), dim=-1, descending=True, stable=True).indices[..., :min(topk, S)]

    query = torch.randn(B, S, heads, qk + pe, dtype=torch.float64, requires_grad=True)
    key = torch.randn(B, S, heads, qk + pe, dtype=torch.float64, requires_grad=True)
    value = torch.randn(B, S, heads, v, dtype=torch.float64, requires_grad=True)
    scale = 0.37

    want_loss = mdsa.compute_dsa_indexer_loss(
        want_scores, top, query.transpose(0, 1).detach(), key.transpose(0, 1).detach(), scale,
        0.3, sparse, groups)
    grads_want = torch.autograd.grad(want_loss, list(indexer.parameters()))
    got_loss = ref.dsa_indexer_loss(got_scores, keep, query, key, scale, 0.3, sparse)
    grads_got = torch.autograd.grad(got_loss, list(indexer.parameters()))
    errors["loss"] = rel(got_loss, want_loss)
    for (n, _), g, w in zip(indexer.named_parameters(), grads_got, grads_want):
        errors["grad " + n] = rel(g, w)

    want_out = mdsa.unfused_dsa_fn(query.transpose(0, 1), key.transpose(0, 1),
                                   value.transpose(0, 1), top, scale)
    got_out = ref.dsa_attention(query, key, value, keep, scale).reshape(B, S, -1)
    dout = torch.randn_like(got_out)
    want_grads = torch.autograd.grad(want_out, (query, key, value), dout.transpose(0, 1))
    got_grads = torch.autograd.grad(got_out, (query, key, value), dout)
    errors["attention"] = rel(got_out, want_out.transpose(0, 1))
    for n, g, w in zip(("query", "key", "value"), got_grads, want_grads):
        errors["grad " + n] = rel(g, w)

    worst = max(errors.values())
    for n, e in errors.items():
        if not e <= TOL:
            failures.append("%s: %s relative error %.3e" % (name, n, e))
    print("dsa oracle %s: %d tensors, worst relative error %s" % (
        name, len(errors), "below 1e-10" if worst <= TOL else "%.3e" % worst))


def ties():
    """Equal scores: the lower key index wins, and only causal keys count."""
    scores = torch.tensor([[[0.0, 0.0, 0.0, 0.0],
                            [1.0, 1.0, 0.0, 0.0],
                            [2.0, 5.0, 2.0, 0.0],
                            [3.0, 3.0, 3.0, 3.0]]], dtype=torch.float64)
    scores = scores.masked_fill(ref.causal_mask(4), float("-inf"))
    keep = ref.dsa_topk(scores, 2)
    want = torch.tensor([[[1, 0, 0, 0],
                          [1, 1, 0, 0],
                          [1, 1, 0, 0],
                          [1, 1, 0, 0]]], dtype=torch.bool)
    ok = torch.equal(keep, want)
    if not ok:
        failures.append("ties: kept %s" % keep.int().tolist())
    print("dsa oracle ties: lower index wins %s" % ("yes" if ok else "no"))


case("rope q_lora topk 4", yarn=False, q_lora=8, topk=4, sparse=False)
case("yarn q_lora topk 4", yarn=True, q_lora=8, topk=4, sparse=False)
case("yarn no q_lora topk 4", yarn=True, q_lora=None, topk=4, sparse=False)
case("rope no q_lora topk 16", yarn=False, q_lora=None, topk=16, sparse=False)
case("yarn q_lora topk 4 sparse loss", yarn=True, q_lora=8, topk=4, sparse=True)
ties()
for f in failures:
    print("MISMATCH " + f)
sys.exit(1 if failures else 0)
