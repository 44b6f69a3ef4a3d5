#!/usr/bin/env python3
"""The GPU benchmark's PyTorch peer: training steps of the same model as a
hypipe artifact (bench/specs/gpu-bench.yaml in the GPU kit), on one GPU,
written as a skilled PyTorch user writes it for speed, and timed.

The model is bench/peer_train.py's (parameters and layers from the
artifact's manifest, Mamba-2 with bench/fast_mamba.py's chunked SSD scan at
chunk 128, MoE experts on their routed rows only as bench/fast_moe.py: a
loop over experts, not tokens) with, on the GPU:
bf16 autocast over fp32 master weights, attention through
F.scaled_dot_product_attention with the flash backend forced, fused AdamW
(`fused=True`, decay only where the manifest says), gradient clipping at the
manifest's norm, and torch.compile (mode default) of each layer kind's
residual block and of the head: regional compilation, the blocks of one kind
sharing one compiled graph (a whole-model compile would also fuse across the
residual adds between blocks). The MoE dispatch stays eager
(torch.compiler.disable): its per-expert row counts change every step.

It times the eager model first (warm-up steps, then STEPS steps), then the
compiled one: warm-up steps that compile, under a time budget
(PEER_COMPILE_BUDGET_S, default 150 s; over it, or on a compile error, it
falls back to eager and says so), then STEPS steps. A step's time is wall
time between CUDA synchronisations. The reported mode is the faster of the
two, as a user would keep. compile_s is the compiled warm-up steps' time
less as many timed steps (tracing, compiling, autotuning).

MFU = model FLOPs per token x tokens/s / peak. The FLOPs per token are
hypipe's cost model's (forward + both backward halves, attention causal),
taken from, in order: --flops-per-token, --explain-json FILE (the output of
`hypipe explain SPEC --json`: the stages' FLOPs per microbatch over its
tokens), the manifest's packing cost (data.packing.cost_per_token +
cost_per_squared_token x seq_length, written for packed specs), or
ARTIFACT.explain.json beside the artifact (the GPU kit's layout).

Prints the settings, a line per phase, and `@figure NAME VALUE UNIT` lines:
peer_eager_tokens_per_s and peer_compiled_tokens_per_s as each phase ends
(a run killed by a time limit keeps the first), then peer_tokens_per_s,
peer_mfu, peer_compile_s and peer_peak_mem_gib (GPU memory allocated at peak
over the reported phase's timed steps; on CPU the process's peak RSS).
Exits 0, 77 when --device cuda finds no GPU, 1 on failure.

--device cpu --no-compile --no-autocast runs the same code eagerly in fp32 on
the CPU (the test path on a machine without a GPU).

usage: peer_train_gpu.py ARTIFACT STEPS [--device cuda|cpu] [--no-compile]
       [--no-autocast] [--warmup N] [--chunk L] [--peak-tflops T]
       [--flops-per-token N | --explain-json FILE] [--data FILE]
"""
import argparse
import contextlib
import functools
import gc
import json
import os
import resource
import signal
import statistics
import sys
import time

# The repository's layout (bench/gpu/ beside bench/ and test/reference/) or
# the GPU kit's (every module in one folder).
here = os.path.dirname(os.path.abspath(__file__))
for d in (os.path.join(here, "..", "..", "test", "reference"), os.path.join(here, ".."), here):
    sys.path.insert(0, d)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

try:
    import fast_mamba
    import fast_moe
    import peer_train
    import torch_reference as ref
except ImportError as e:
    sys.exit("peer_train_gpu: %s: it needs bench/peer_train.py, bench/fast_mamba.py, "
             "bench/fast_moe.py and test/reference/torch_reference.py, in the repository's "
             "layout or in its own folder" % e)


class CompileBudgetExpired(Exception):
    pass


def flops_per_token(args, manifest):
    """The cost model's training FLOPs per token and where they came from,
    or (None, why not)."""
    tr = manifest["training"]
    tokens_per_microbatch = tr["micro_batch_size"] * tr["seq_length"]
    if args.flops_per_token:
        return args.flops_per_token, "--flops-per-token"
    beside = args.artifact.rstrip("/") + ".explain.json"
    explain = args.explain_json or None
    packing = manifest.get("data", {}).get("packing", {})
    if explain is None and packing.get("enabled") and packing.get("cost_per_token", 0) > 0:
        per = packing["cost_per_token"] + packing["cost_per_squared_token"] * tr["seq_length"]
        return per, "the manifest's packing cost at seq_length %d" % tr["seq_length"]
    if explain is None and os.path.exists(beside):
        explain = beside
    if explain is None:
        return None, ("the manifest has no FLOPs (its spec does not pack) and there is no %s; "
                      "give --flops-per-token N or --explain-json FILE (hypipe explain SPEC "
                      "--json)" % beside)
    e = json.load(open(explain))
    if e.get("model") != manifest["model"]["name"]:
        return None, "%s describes model '%s', the artifact is '%s'" % (
            explain, e.get("model"), manifest["model"]["name"])
    if not e.get("costs_exact", True):
        print("peer: warning: %s says some layers' costs are counted as zero" % explain)
    total = sum(s["forward_flops"] + s["backward_input_flops"] + s["backward_weight_flops"]
                for s in e["stages"])
    return total / tokens_per_microbatch, explain


def sdpa_core(q, k, v):
    """torch_reference.attention's core through PyTorch's fused attention:
    [b, s, heads, d] in and out, SDPA's [b, heads, s, d] in between."""
    return F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                          v.transpose(1, 2), is_causal=True).transpose(1, 2)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("steps", type=int, help="timed steps per phase")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--no-compile", action="store_true", help="eager only")
    ap.add_argument("--no-autocast", action="store_true", help="fp32 throughout")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before each phase")
    ap.add_argument("--chunk", type=int, default=128,
                    help="the SSD scan's chunk length (default 128: half the sequential "
                         "steps between chunks of the CPU peer's 64, for intra-chunk "
                         "matmuls that stay small next to the projections)")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="the device's peak (default: H100 SXM dense bf16)")
    ap.add_argument("--flops-per-token", type=float, default=0.0)
    ap.add_argument("--explain-json", default="")
    ap.add_argument("--data", default="", help="token bytes (default: the manifest's)")
    return ap.parse_args()


def main():
    # Line by line, so that a run killed by its time limit keeps what it printed.
    sys.stdout.reconfigure(line_buffering=True)
    args = parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("peer_train_gpu: no CUDA device visible to PyTorch; skipped")
        return 77
    manifest = json.load(open(os.path.join(args.artifact, "manifest.json")))
    m, tr = manifest["model"], manifest["training"]
    if m.get("mtp_depths", 0):
        print("peer_train_gpu: the peer has no multi-token prediction; this model has %d depths"
              % m["mtp_depths"])
        return 1
    per_token, source = flops_per_token(args, manifest)
    if per_token is None:
        print("peer_train_gpu: no FLOPs per token: " + source)
        return 1
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    compile_wanted = not args.no_compile
    if compile_wanted and not hasattr(torch, "compile"):
        print("peer: torch %s has no torch.compile; eager only" % torch.__version__)
        compile_wanted = False
    if cuda:
        # What a user sets for the fp32 matmuls autocast leaves (none in
        # these layers with autocast on; all of them with --no-autocast).
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    use_sdpa = hasattr(F, "scaled_dot_product_attention")
    autocast = (not args.no_autocast)

    B, S = tr["micro_batch_size"], tr["seq_length"]
    M = manifest["parallel"]["microbatches"]
    params = peer_train.init_params(manifest, device=dev)
    layers = peer_train.layer_list(manifest, params)
    dims = peer_train.model_dims(m)
    n_params = sum(p.numel() for p in params.values())
    decay = {p["name"]: p.get("weight_decay", True) for s in manifest["stages"]
             for p in s["params"]}
    groups = [{"params": [t for n, t in params.items() if decay[n]],
               "weight_decay": tr.get("weight_decay", 0.01)},
              {"params": [t for n, t in params.items() if not decay[n]], "weight_decay": 0.0}]
    opt_kw = {"fused": True} if cuda else {"foreach": True}
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=tr["lr"],
                            betas=(tr.get("adam_beta1", 0.9), tr.get("adam_beta2", 0.999)),
                            eps=tr.get("adam_eps", 1e-8), **opt_kw)
    clip = tr.get("grad_clip", 1.0)

    data_path = args.data or manifest["data"]["path"]
    data = open(data_path, "rb").read() if os.path.exists(data_path) else None
    n_batches = args.warmup + args.steps
    batches = []
    for i in range(n_batches):
        mbs = []
        for j in range(M):
            if data is not None and len(data) > S + 1:
                tokens, labels = peer_train.batch(data, B, S, i * M + j)
            else:
                gen = torch.Generator().manual_seed(i * M + j)
                rows = torch.randint(0, m["vocab_size"], (B, S + 1), generator=gen)
                tokens, labels = rows[:, :-1], rows[:, 1:]
            mbs.append((tokens.to(dev), labels.to(dev)))
        batches.append(mbs)

    print("peer: model %s, %s parameters, %d x %d tokens x %d microbatches per step, "
          "%s, %s, attention %s, SSD chunk %d" % (
              m["name"], format(n_params, ","), B, S, M, dev,
              "bf16 autocast, fp32 master weights" if autocast else "fp32",
              "F.scaled_dot_product_attention" + (" (flash forced)" if cuda and autocast else "")
              if use_sdpa else "einsum (this torch has no SDPA)", args.chunk))
    print("peer: data %s" % (data_path if data is not None
                             else "random token ids (%s not found)" % data_path))
    print("peer: %.4g GFLOP per token from %s" % (per_token / 1e9, source))

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def autocast_ctx():
        if not autocast:
            return contextlib.nullcontext()
        return torch.autocast(dev.type, dtype=torch.bfloat16)

    def build(compiled):
        """(block per layer kind, head) eager or compiled."""
        scan = functools.partial(fast_mamba.ssd_scan, chunk=args.chunk)

        def mamba(x, p, d):
            return ref.mamba(x, p, d, scan=scan)

        def attention(x, p, d):
            return ref.attention(x, p, d, core=sdpa_core if use_sdpa else ref.softmax_attention)

        # The dispatch reads each expert's row count on the host (one sync
        # per MoE layer); compiled, every new count would be a recompile.
        moe = torch.compiler.disable(fast_moe.moe) if compiled else fast_moe.moe
        block_of = peer_train.blocks(m, dims, mamba=mamba, attention=attention, moe=moe)
        head = peer_train.head_loss
        if compiled:
            block_of = {k: torch.compile(f) for k, f in block_of.items()}
            head = torch.compile(head)
        return block_of, head

    def train_step(block_of, head, mbs):
        opt.zero_grad(set_to_none=True)
        for tokens, labels in mbs:
            with autocast_ctx():
                loss = peer_train.forward(params, layers, block_of, head, tokens, labels)
            (loss / M).backward()
        torch.nn.utils.clip_grad_norm_(params.values(), clip)
        opt.step()
        return loss

    def run(block_of, head, count, first=0):
        """count steps: each one's seconds and loss."""
        times, losses = [], []
        for i in range(first, first + count):
            sync()
            t0 = time.perf_counter()
            loss = train_step(block_of, head, batches[i % n_batches])
            sync()
            times.append(time.perf_counter() - t0)
            losses.append(loss.item())
        return times, losses

    def peak_reset():
        if cuda:
            torch.cuda.reset_peak_memory_stats()

    def peak_gib():
        if cuda:
            return torch.cuda.max_memory_allocated() / 2**30
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux

    def timed_phase(name, block_of, head):
        peak_reset()
        times, losses = run(block_of, head, args.steps, first=args.warmup)
        tps = B * S * M * len(times) / sum(times)
        print("peer: %s: %d timed steps, median %.1f ms, %.1f tokens/s, loss %.4f -> %.4f, "
              "peak %.2f GiB" % (name, len(times), 1e3 * statistics.median(times), tps,
                                 losses[0], losses[-1], peak_gib()))
        print("@figure peer_%s_tokens_per_s %.1f tok/s" % (name, tps))
        return {"tps": tps, "median": statistics.median(times), "peak": peak_gib()}

    sdpa_ctx = contextlib.nullcontext()
    if cuda and autocast and use_sdpa:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        sdpa_ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION)

    results, compile_s, compile_note = {}, 0.0, "not asked (--no-compile)"
    with sdpa_ctx:
        block_of, head = build(compiled=False)
        run(block_of, head, args.warmup)
        results["eager"] = timed_phase("eager", block_of, head)

        if compile_wanted:
            budget = float(os.environ.get("PEER_COMPILE_BUDGET_S", "150"))
            expired, armed = [], [True]

            def on_alarm(signum, frame):
                if armed[0]:
                    expired.append(True)
                    raise CompileBudgetExpired("compile over its budget of %g s" % budget)

            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            block_of, head = build(compiled=True)
            old = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, budget)
            t0 = time.perf_counter()
            failure = None
            try:
                warm, _ = run(block_of, head, max(args.warmup, 1))
                armed[0] = False
            except Exception as e:  # noqa: BLE001 - any compile failure means eager
                armed[0] = False
                failure = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
            finally:
                # Python code sees the alarm; a compile inside backward (run
                # by autograd's device thread) is only interrupted after it.
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
            spent = time.perf_counter() - t0
            if expired or failure:
                why = "over PEER_COMPILE_BUDGET_S=%g s" % budget if expired else failure
                compile_note = "FAILED after %.1f s (%s): falling back to eager" % (spent, why)
                compile_s = spent
                block_of = head = None
                gc.collect()
                from torch import _dynamo
                _dynamo.reset()
                if cuda:
                    torch.cuda.empty_cache()
            else:
                results["compiled"] = timed_phase("compiled", block_of, head)
                compile_s = max(0.0, sum(warm) - len(warm) * results["compiled"]["median"])
                compile_note = "%d warm-up steps in %.1f s, %.1f s over timed steps" % (
                    len(warm), spent, compile_s)
    print("peer: torch.compile: %s" % compile_note)

    mode = max(results, key=lambda k: results[k]["tps"])
    best = results[mode]
    mfu = 100.0 * per_token * best["tps"] / (args.peak_tflops * 1e12)
    print("peer: reported mode: %s (%s); MFU against %g TFLOP/s" % (
        mode, ", ".join("%s %.1f tok/s" % (k, r["tps"]) for k, r in results.items()),
        args.peak_tflops))
    print("@figure peer_tokens_per_s %.1f tok/s" % best["tps"])
    print("@figure peer_mfu %.2f %%" % mfu)
    print("@figure peer_compile_s %.1f s" % compile_s)
    print("@figure peer_peak_mem_gib %.2f GiB" % best["peak"])
    return 0


if __name__ == "__main__":
    from kit_main import run
    run(main, "peer_train_gpu")
