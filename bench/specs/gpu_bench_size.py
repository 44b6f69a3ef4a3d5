#!/usr/bin/python3
"""The parameter count of a spec's model, counted from its dimensions with
Megatron-LM's module shapes (Nemotron-H style: no linear biases, the
pre-norms fused into the first linear of each mixer), independently of
hypipe's cost model; and the FLOPs per token of its matrix products (2 per
multiply-add, forward + both backward halves = 3x the forward; attention's
QK^T and PV causal, so half the square), a lower bound of any cost model's.

usage: gpu_bench_size.py SPEC.yaml [--check EXPLAIN.json NOTE.md]
prints the two counts; with --check, also holds hypipe's cost model (`hypipe
explain --json`) to them: the same parameters, FLOPs per token at or above
the products' and within 10% of them; and NOTE.md must state both of the
cost model's figures as written in it (test/cli/gpu-bench.test)."""
import re
import sys


def spec_model(path):
    model, section = {}, None
    for line in open(path):
        line = line.split("#")[0].rstrip()
        if re.match(r"^\w", line):
            section = line.rstrip(":")
        elif section == "model" and ":" in line:
            k, v = (x.strip() for x in line.split(":", 1))
            model[k] = v.strip('"')
        elif section == "training" and line.strip().startswith("seq_length"):
            model["seq_length"] = line.split(":")[1].strip()
    return model


def main():
    m = spec_model(sys.argv[1])
    i = {k: int(v) for k, v in m.items() if v.isdigit()}
    h, vocab, seq = i["hidden_size"], i["vocab_size"], i["seq_length"]
    heads, groups = i["num_attention_heads"], i["num_query_groups"]
    kv = h // heads
    mh, mp, ms, mg = (i["mamba_num_heads"], i["mamba_head_dim"], i["mamba_state_dim"],
                      i["mamba_num_groups"])
    conv = i.get("mamba_conv_width", 4)
    inner = mh * mp
    gated = m.get("activation", "squared_relu") in ("swiglu", "geglu")
    ffn, moe_ffn = i["ffn_hidden_size"], i.get("moe_ffn_hidden_size", 0)
    experts, topk = i.get("num_experts", 0), i.get("moe_router_topk", 0)
    fc1 = lambda f: h * f * (2 if gated else 1)  # noqa: E731
    layer = {  # (parameters, active parameters in matrix products per token)
        "M": (h + h * (2 * inner + 2 * mg * ms + mh) + (inner + 2 * mg * ms) * (conv + 1)
              + 3 * mh + inner + inner * h,
              h * (2 * inner + 2 * mg * ms + mh) + inner * h),
        "*": (h + h * (heads + 2 * groups) * kv + heads * kv * h,
              h * (heads + 2 * groups) * kv + heads * kv * h),
        "-": (h + fc1(ffn) + ffn * h, fc1(ffn) + ffn * h),
        "E": (h + experts * h + experts * (fc1(moe_ffn) + moe_ffn * h),
              experts * h + topk * (fc1(moe_ffn) + moe_ffn * h)),
    }
    pattern = m["pattern"].replace("|", "")
    params = sum(layer[c][0] for c in pattern) + h  # + the final norm
    params += vocab * h * (1 if m.get("tie_embeddings") == "true" else 2)
    matmul = sum(layer[c][1] for c in pattern) + vocab * h  # the output layer
    # QK^T and PV: heads * kv * seq / 2 multiply-adds each per token (causal).
    attention = pattern.count("*") * 2 * heads * kv * seq
    flops = 3 * (2 * matmul + attention)
    print(f"parameters {params}")
    print(f"matmul_flops_per_token {flops}")
    print(f"gemm_flops_per_token {3 * 2 * matmul}")  # the linear layers alone
    if len(sys.argv) == 5 and sys.argv[2] == "--check":
        return check(params, flops, sys.argv[3], sys.argv[4])
    return 0


def check(params, matmul_flops, explain_path, note_path):
    import json
    explain = json.load(open(explain_path))
    stage_flops = sum(s["forward_flops"] + s["backward_input_flops"] + s["backward_weight_flops"]
                      for s in explain["stages"])
    tokens = int(spec_model(sys.argv[1])["seq_length"])  # one microbatch of one sequence
    per_token = stage_flops / tokens
    note = open(note_path).read().replace(",", "")
    errors = []
    if explain["parameters"] != params:
        errors.append(f"hypipe counts {explain['parameters']} parameters, Megatron's shapes {params}")
    if not matmul_flops <= per_token <= 1.1 * matmul_flops:
        errors.append(f"hypipe's {per_token:.4g} FLOPs per token against {matmul_flops:.4g} in products")
    for figure in (str(params), f"{per_token / 1e9:.3f}"):
        if figure not in note:
            errors.append(f"{note_path} does not say {figure}")
    for e in errors:
        print("MISMATCH " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
