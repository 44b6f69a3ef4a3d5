#!/usr/bin/python3
"""A Hugging Face export of a hypipe model of G or + layers (Qwen3-Next or
DeepSeek-V3, what `hypipe ckpt export --format hf` writes) loaded by
transformers' own AutoModelForCausalLM, against hypipe on a batch hypipe
trained on (a `hypipe-run --dump-step` file: its parameters, tokens, labels
and loss):

- transformers' float64 logits on every microbatch against the float64
  reference's (torch_reference.py's gated_delta_net, mla and mlp, the
  layers the G and + oracle tests check against transformers' own layers,
  on hypipe's parameters under hypipe's names, dimensions from the
  artifact's manifest): the largest difference over the largest logit,
  within --logits-tol;
- transformers' float64 loss (the mean over microbatches of their mean
  cross-entropy) against the loss hypipe computed in float32, within --tol.

--latent-eps E sets the epsilon of DeepSeek-V3's latent norms
(q_a_layernorm, kv_a_layernorm), which transformers fixes at 1e-6 whatever
rms_norm_eps says, where Megatron-LM and hypipe take the layer norm epsilon
(1e-5): with E = 1e-5 the model is hypipe's exactly. Exits 77 (skipped)
when transformers is not installed.

usage: check_hf_export.py HF_DIR DUMP ARTIFACT [--tol 1e-5]
                          [--logits-tol 1e-5] [--latent-eps E]"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def reference_logits(manifest, params, tokens):
    """The float64 model on a [batch, seq] block of token ids."""
    m = manifest["model"]
    x = params["embedding.word_embeddings.weight"][tokens]
    for stage in manifest["stages"]:
        for layer in stage["layers"]:
            kind, shape = layer["kind"], layer["shape"]
            prefix = "decoder.layers.%d." % (layer["layer"] - 1)
            p = {n[len(prefix):]: t for n, t in params.items() if n.startswith(prefix)}
            if kind in ("embedding", "head"):
                continue
            if kind == "gdn":
                dims = {"key_heads": shape["key_heads"], "value_heads": shape["value_heads"],
                        "key_dim": shape["key_head_dim"], "value_dim": shape["value_head_dim"],
                        "conv": shape["conv_width"]}
                x = x + ref.gated_delta_net(
                    ref.rmsnorm(x, p["self_attention.in_proj.layer_norm_weight"]), p, dims)
            elif kind == "mla":
                dims = dict(shape, rope_type="yarn" if shape["yarn"] else "rope")
                x = x + ref.mla(ref.rmsnorm(x, p["input_layernorm.weight"]), p, dims)
            elif kind == "mlp":
                x = x + ref.mlp(ref.rmsnorm(x, p["mlp.linear_fc1.layer_norm_weight"]), p,
                                m["activation"])
            else:
                sys.exit("check_hf_export.py: no reference for %s layers" % kind)
    h = ref.rmsnorm(x, params["decoder.final_norm.weight"])
    head = params["embedding.word_embeddings.weight" if m["tie_embeddings"]
                  else "output_layer.weight"]
    return h @ head.T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf_dir")
    ap.add_argument("dump")
    ap.add_argument("artifact")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--logits-tol", type=float, default=1e-5)
    ap.add_argument("--latent-eps", type=float, default=None)
    args = ap.parse_args()
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        print("transformers is not installed: skipped")
        sys.exit(77)
    manifest = json.load(open(os.path.join(args.artifact, "manifest.json")))
    dump, meta = ref.load_safetensors(args.dump)
    params = {n[len("param."):]: t.double() for n, t in dump.items() if n.startswith("param.")}
    tokens, labels = dump["tokens"].long(), dump["labels"].long()  # [m, b, s]

    model = AutoModelForCausalLM.from_pretrained(args.hf_dir, dtype=torch.float64).eval()
    name = model.__class__.__name__
    if args.latent_eps is not None:
        patched = 0
        for module_name, module in model.named_modules():
            if module_name.endswith(("q_a_layernorm", "kv_a_layernorm")):
                module.variance_epsilon = args.latent_eps
                patched += 1
        print("latent norms' epsilon set to %g in %d norms" % (args.latent_eps, patched))

    worst, losses = 0.0, []
    with torch.no_grad():
        for t, l in zip(tokens, labels):
            theirs = model(input_ids=t).logits
            ours = reference_logits(manifest, params, t)
            worst = max(worst, float((theirs - ours).abs().max() / ours.abs().max()))
            losses.append(F.cross_entropy(theirs.flatten(0, 1), l.flatten()))
    ok_logits = worst <= args.logits_tol
    print("transformers %s float64 logits vs the float64 reference: largest difference "
          "%.2g of the largest logit (%s %g)"
          % (name, worst, "within" if ok_logits else "ABOVE", args.logits_tol))
    got, want = float(torch.stack(losses).mean()), float(meta["loss"])
    rel = abs(got - want) / abs(want)
    ok_loss = rel <= args.tol
    print("transformers %s: loss %.7f, hypipe %.7f, relative difference %.2g (%s %g)"
          % (name, got, want, rel, "within" if ok_loss else "ABOVE", args.tol))
    sys.exit(0 if ok_logits and ok_loss else 1)


if __name__ == "__main__":
    main()
