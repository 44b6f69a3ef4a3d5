"""One Gated DeltaNet layer in PyTorch, the peer of bench-gdn: the pre-norm,
transformers' Qwen3NextGatedDeltaNet (in_proj_qkvz and in_proj_ba, the
causal conv, and the chunked gated delta rule of its
torch_chunk_gated_delta_rule, chunks of 64: what transformers runs without
flash-linear-attention's kernels, a batched-matmul form written for speed)
and the residual; gdn-oracle.test checks that layer against the float64
definition. Forward, then backward of <y, dy> through autograd (input and
weight gradients), float32, the least of `reps` runs after a warm-up, on
`threads` PyTorch threads; with --compile the layer through torch.compile.

usage: fast_gdn.py THREADS REPS HIDDEN KEY_HEADS VALUE_HEADS KEY_DIM VALUE_DIM
                   BATCH SEQ [--compile]
prints: forward_ms backward_ms"""
import argparse
import time

import torch

from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig
from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextGatedDeltaNet


class Layer(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.norm = torch.nn.RMSNorm(config.hidden_size, eps=1e-5)
        self.mixer = Qwen3NextGatedDeltaNet(config, 0)

    def forward(self, x):
        return x + self.mixer(self.norm(x))


def main():
    ap = argparse.ArgumentParser()
    for name in ("threads", "reps", "hidden", "key_heads", "value_heads", "key_dim",
                 "value_dim", "batch", "seq"):
        ap.add_argument(name, type=int)
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(5)
    config = Qwen3NextConfig(hidden_size=a.hidden, linear_num_key_heads=a.key_heads,
                             linear_num_value_heads=a.value_heads, linear_key_head_dim=a.key_dim,
                             linear_value_head_dim=a.value_dim, linear_conv_kernel_dim=4,
                             rms_norm_eps=1e-5, num_hidden_layers=1,
                             layer_types=["linear_attention"])
    layer = Layer(config)
    with torch.no_grad():
        for p in layer.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.05)
    run = torch.compile(layer) if a.compile else layer
    x = torch.randn(a.batch, a.seq, a.hidden, requires_grad=True)
    dy = torch.randn(a.batch, a.seq, a.hidden)
    forward = backward = float("inf")
    for r in range(a.reps + 1):  # run 0 warms up (and compiles)
        layer.zero_grad(set_to_none=True)
        x.grad = None
        t0 = time.perf_counter()
        y = run(x)
        t1 = time.perf_counter()
        y.backward(dy)
        t2 = time.perf_counter()
        if r > 0:
            forward = min(forward, (t1 - t0) * 1e3)
            backward = min(backward, (t2 - t1) * 1e3)
    print("%.3f %.3f" % (forward, backward))


if __name__ == "__main__":
    main()
