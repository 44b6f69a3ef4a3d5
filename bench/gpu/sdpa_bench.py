#!/usr/bin/env python3
"""PyTorch's fused attention on this GPU: the baseline for hypipe's attention
kernels (the GPU kit's `sdpa-flash` check).

F.scaled_dot_product_attention, bf16, causal, sequence 4096, 4 sequences
(16,384 tokens), head dim 64 and 128 with 2048 / head_dim heads (hidden 2048,
as bench/specs/gpu-bench.yaml), forward alone and forward + backward, with
the flash backend forced (`sdpa_kernel(SDPBackend.FLASH_ATTENTION)`) and, as
a second row, the cuDNN backend where it runs here (its failure is printed,
not fatal). Each time is the median over repeats of one call bracketed by
CUDA events, after warm-up calls; gradients are reset outside the events.

FLOPs follow the FlashAttention-2 paper's convention: the causal forward is
4 * B * H * S^2 * D / 2 (QK^T and PV over the lower triangle), the backward
2.5 times that (five matmuls to the forward's two), so forward + backward is
3.5 times the forward. The backward row is derived: its FLOPs over the
forward + backward time less the forward time.

Prints a table, then one `@figure NAME VALUE UNIT` line per figure. Exits 0,
77 without a CUDA device, 1 when the flash backend fails.

usage: sdpa_bench.py [--repeats N] [--warmup N]
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

SEQ = 4096
TOKENS = 16384
HIDDEN = 2048


def median_ms(fn, before, warmup, repeats):
    """Median time of fn() in milliseconds: warm-up calls first, then each
    repeat timed alone with CUDA events; before() runs outside the events."""
    for _ in range(warmup):
        before()
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        before()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure(backend, head_dim, warmup, repeats):
    """Forward and forward + backward times (ms) of one backend at one head
    dim, and the forward output (for the backends' agreement)."""
    from torch.nn.attention import sdpa_kernel

    batch, heads = TOKENS // SEQ, HIDDEN // head_dim
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(batch, heads, SEQ, head_dim, device="cuda", dtype=torch.bfloat16,
                           generator=gen).requires_grad_(True) for _ in range(3))
    dout = torch.randn(batch, heads, SEQ, head_dim, device="cuda", dtype=torch.bfloat16,
                       generator=gen)

    def reset():
        q.grad = k.grad = v.grad = None

    with sdpa_kernel(backend):
        with torch.no_grad():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                            lambda: None, warmup, repeats)

        def fwd_bwd():
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dout)

        both = median_ms(fwd_bwd, reset, warmup, repeats)
    return fwd, both, out, (batch, heads)


def main():
    sys.stdout.reconfigure(line_buffering=True)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("sdpa_bench: no CUDA device visible to PyTorch; skipped")
        return 77
    from torch.nn.attention import SDPBackend

    print("device: %s, torch %s, cuDNN %s" % (torch.cuda.get_device_name(),
                                             torch.__version__, torch.backends.cudnn.version()))
    print("causal bf16, seq %d, %d tokens per call; FLOPs: forward 4*B*H*S^2*D/2, "
          "backward 2.5x forward (FlashAttention-2's convention)" % (SEQ, TOKENS))
    rows, figures, failed = [], [], False
    for head_dim in (64, 128):
        flash_out = None
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION),
                              ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                fwd, both, out, (batch, heads) = measure(backend, head_dim, args.warmup,
                                                         args.repeats)
            except Exception as e:  # noqa: BLE001 - report any backend failure
                print("%s, head dim %d: failed: %s: %s"
                      % (name, head_dim, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
                failed |= name == "flash"
                continue
            flops_fwd = 4.0 * batch * heads * SEQ * SEQ * head_dim / 2
            flops_bwd = 2.5 * flops_fwd
            tf_fwd = flops_fwd / (fwd * 1e-3) / 1e12
            tf_both = (flops_fwd + flops_bwd) / (both * 1e-3) / 1e12
            tf_bwd = flops_bwd / ((both - fwd) * 1e-3) / 1e12 if both > fwd else float("nan")
            agree = ""
            if flash_out is None:
                flash_out = out
            else:
                agree = "%.2e" % (out.float() - flash_out.float()).abs().max().item()
            rows.append((name, head_dim, batch, heads, fwd, both, tf_fwd, tf_both, tf_bwd, agree))
            key = "sdpa_%s_%%s_d%d" % (name, head_dim)
            figures += [(key % "fwd", tf_fwd), (key % "fwdbwd", tf_both), (key % "bwd", tf_bwd)]
    header = ("backend", "head_dim", "B", "H", "fwd_ms", "fwd+bwd_ms", "fwd_TFLOP/s",
              "fwd+bwd_TFLOP/s", "bwd_TFLOP/s", "max|out-flash|")
    print("  ".join("%14s" % h for h in header))
    for r in rows:
        print("  ".join("%14s" % c for c in (r[0], r[1], r[2], r[3], "%.3f" % r[4], "%.3f" % r[5],
                                             "%.1f" % r[6], "%.1f" % r[7], "%.1f" % r[8], r[9])))
    for name, value in figures:
        print("@figure %s %.2f TFLOP/s" % (name, value))
    if failed:
        print("sdpa_bench: the flash backend failed")
        return 1
    return 0


if __name__ == "__main__":
    from kit_main import run
    run(main, "sdpa_bench")
