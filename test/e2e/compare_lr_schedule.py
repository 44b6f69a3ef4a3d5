#!/usr/bin/python3
"""Trains SPEC with Megatron-LM's learning-rate flags and compares the
learning rate hypipe-run logged at each step with the one megatron-core's own
OptimizerParamScheduler gives the same step's update.

usage: compare_lr_schedule.py BINDIR SPEC OUTDIR CASE...

Each CASE is one argument, "NAME: MEGATRON-FLAGS...": Megatron-LM's flags
(--train-iters, --global-batch-size, --lr, --min-lr, --lr-decay-style,
--lr-warmup-iters or --lr-warmup-fraction, --lr-decay-iters,
--lr-wsd-decay-iters, --lr-wsd-decay-style), given as they are to `hypipe
compile` (--lr-decay-iters to hypipe-run). The scheduler is built as
megatron/training/training.py's get_optimizer_param_scheduler builds it (its
steps in samples: iterations times the global batch), and driven as
train_step drives it: each iteration's update runs at the rate the scheduler
holds, then the scheduler steps by the global batch. A case with
--plant-cosine drives megatron-core's scheduler with cosine whatever the
style, to show that the comparison can fail: it passes when it differs.
All cases in one process: importing megatron-core takes seconds."""
import argparse
import json
import os
import subprocess
import sys
import types
import warnings

warnings.simplefilter("ignore")  # megatron-core warns that Apex is missing
from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

parser = argparse.ArgumentParser()
parser.add_argument("--train-iters", type=int, required=True)
parser.add_argument("--global-batch-size", type=int, required=True)
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--min-lr", type=float, default=0.0)
parser.add_argument("--lr-decay-style", default="linear")
parser.add_argument("--lr-warmup-iters", type=int, default=0)
parser.add_argument("--lr-warmup-fraction", type=float)
parser.add_argument("--lr-decay-iters", type=int)
parser.add_argument("--lr-wsd-decay-iters", type=int)
parser.add_argument("--lr-wsd-decay-style", default="exponential")
parser.add_argument("--plant-cosine", action="store_true")


def train(bindir, spec, outdir, flags):
    """hypipe compile with `flags` and hypipe-run: the JSON log's path."""
    flags = [f for f in flags if f != "--plant-cosine"]
    decay_flag = []
    if "--lr-decay-iters" in flags:
        at = flags.index("--lr-decay-iters")
        decay_flag, flags = flags[at:at + 2], flags[:at] + flags[at + 2:]
    artifact = os.path.join(outdir, "artifact")
    log = os.path.join(outdir, "log.jsonl")
    subprocess.run([os.path.join(bindir, "hypipe"), "compile", spec, *flags,
                    "-o", artifact], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(bindir, "hypipe-run"), artifact, "-q",
                    "--json-log", log, *decay_flag], check=True,
                   stdout=subprocess.DEVNULL)
    return log


def megatron_rates(args):
    """The rate of each iteration's update, from megatron-core's scheduler."""
    gbs = args.global_batch_size
    lr_decay_steps = (args.lr_decay_iters or args.train_iters) * gbs
    if args.lr_warmup_fraction is not None:
        lr_warmup_steps = args.lr_warmup_fraction * lr_decay_steps
    else:
        lr_warmup_steps = args.lr_warmup_iters * gbs
    wsd_decay_steps = None
    if args.lr_wsd_decay_iters is not None:
        wsd_decay_steps = args.lr_wsd_decay_iters * gbs
    optimizer = types.SimpleNamespace(param_groups=[{}])
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=args.lr, min_lr=args.min_lr,
        lr_warmup_steps=lr_warmup_steps, lr_decay_steps=lr_decay_steps,
        lr_decay_style="cosine" if args.plant_cosine else args.lr_decay_style,
        start_wd=0.01, end_wd=0.01, wd_incr_steps=args.train_iters * gbs,
        wd_incr_style="constant", wsd_decay_steps=wsd_decay_steps,
        lr_wsd_decay_style=args.lr_wsd_decay_style)
    rates = []
    for _ in range(args.train_iters):
        rates.append(optimizer.param_groups[0]["lr"])
        scheduler.step(increment=gbs)
    return rates


def compare(name, log, args):
    """Prints the case's verdict; whether it is the expected one."""
    logged = {}
    for line in open(log):
        record = json.loads(line)
        logged[record["step"]] = record["lr"]
    if sorted(logged) != list(range(1, args.train_iters + 1)):
        print("%s: the log has steps %s, not 1 to %d"
              % (name, sorted(logged), args.train_iters))
        return False
    worst = 0.0
    for step, want in enumerate(megatron_rates(args), start=1):
        got = logged[step]
        error = abs(got - want) / abs(want) if want else abs(got)
        if error > 1e-12 and not args.plant_cosine:
            print("%s step %d: hypipe %r, megatron-core %r" % (name, step, got, want))
        worst = max(worst, error)
    equal = worst <= 1e-12
    print("%s: %d steps, %s" % (name, args.train_iters,
                                "equal" if equal else "DIFFERENT"))
    return equal != args.plant_cosine


bindir, spec, outdir = sys.argv[1:4]
ok = True
for case in sys.argv[4:]:
    name, _, text = case.partition(":")
    flags = text.split()
    case_dir = os.path.join(outdir, name)
    os.makedirs(case_dir, exist_ok=True)
    ok = compare(name, train(bindir, spec, case_dir, flags),
                 parser.parse_args(flags)) and ok
sys.exit(0 if ok else 1)
