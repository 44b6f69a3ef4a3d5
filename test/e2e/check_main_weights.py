#!/usr/bin/python3
"""The optimizer's step of a bf16 run, against float64 AdamW.

Reads the first step's dump (`hypipe-run --dump-step`: the fp32 main weights
before the update and the fp32-accumulated gradients), the step's JSON log
line (its learning rate and gradient norm) and the checkpoint saved after
it (merged with `hypipe ckpt merge`). Applies Megatron's AdamW in float64
to the main weights with the gradients clipped as Megatron clips them, and
compares with the checkpoint's weights and first moments: each tensor
within TOL (norm-wise relative). Also counts the saved weights that are not
bfloat16 values: the main weights must stay fp32 (a run that kept only the
bf16 copy would save none).

usage: check_main_weights.py ARTIFACT DUMP LOG MERGED [TOL]
"""
import json
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/reference")
from torch_reference import load_safetensors  # noqa: E402


def main():
    artifact, dump, log, merged = sys.argv[1:5]
    tol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-6
    manifest = json.load(open(artifact + "/manifest.json"))
    t = manifest["training"]
    decays = {p["name"]: p["weight_decay"]
              for s in manifest["stages"] for p in s["params"]}
    before, _ = load_safetensors(dump)
    after, _ = load_safetensors(merged)
    step = json.loads(open(log).readline())
    lr, norm = step["lr"], step["grad_norm"]
    if not lr > 0:
        print("MISMATCH: the step's lr is %r: its update changes no weight" % lr)
        sys.exit(1)
    clip = 1.0
    if t["grad_clip"] > 0:
        clip = min(1.0, t["grad_clip"] / (norm + 1e-6))
    b1, b2, eps = t["adam_beta1"], t["adam_beta2"], t["adam_eps"]
    worst, not_bf16, total, failures = 0.0, 0, 0, []
    for name, decay in sorted(decays.items()):
        w = before["param." + name].double()
        g = before["grad." + name].double() * clip
        m = (1 - b1) * g
        v = (1 - b2) * g * g
        step1 = (m / (1 - b1)) / ((v / (1 - b2)).sqrt() + eps)
        want = w * (1 - lr * t["weight_decay"] if decay else 1.0) - lr * step1
        for label, got, ref in (("weight", after[name], want),
                                ("exp_avg", after["optimizer.exp_avg." + name], m)):
            err = (got.double() - ref).norm().item() / max(ref.norm().item(), 1e-30)
            worst = max(worst, err)
            if not err <= tol:
                failures.append("%s %s: relative error %.3e" % (label, name, err))
        saved = after[name]
        not_bf16 += int((saved != saved.to(torch.bfloat16).float()).sum())
        total += saved.numel()
    print("adamw: %d parameters, max relative error %.2e (tolerance %.0e), "
          "%d of %d saved weights are not bf16 values"
          % (len(decays), worst, tol, not_bf16, total))
    for f in failures:
        print("MISMATCH " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
