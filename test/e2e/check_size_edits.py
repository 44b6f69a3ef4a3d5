#!/usr/bin/python3
"""Edits each size a manifest records to 2^40, past every bound, and checks
that hypipe-run refuses it naming the field (the bounds of the spec's
fields, docs/security.md "Sizes"), without running out of memory.

usage: check_size_edits.py HYPIPE_RUN ARTIFACT PACKED_ARTIFACT WORKDIR"""
import json
import shutil
import subprocess
import sys

hypipe_run, artifact, packed, work = sys.argv[1:5]
HUGE = 2**40
FIELDS = {
    artifact: [
        "model.num_layers", "model.hidden_size", "model.ffn_hidden_size",
        "model.num_attention_heads", "model.num_query_groups",
        "model.mamba_state_dim", "model.mamba_num_heads",
        "model.mamba_head_dim", "model.mamba_num_groups",
        "model.mamba_conv_width", "model.num_experts", "model.moe_router_topk",
        "model.moe_ffn_hidden_size", "model.vocab_size", "parallel.pp",
        "parallel.vpp", "parallel.dp", "parallel.microbatches",
        "parallel.microbatch_group_size", "training.seq_length",
        "training.micro_batch_size", "training.steps", "training.warmup_steps",
        "training.lr_decay_steps"],
    packed: [
        "data.packing.max_tokens_per_microbatch",
        "data.packing.global_batch_size", "data.packing.min_bin_count",
        "data.packing.bin_count_multiple"],
}

failures = []
for source, fields in FIELDS.items():
    edited = f"{work}/edited"
    shutil.rmtree(edited, ignore_errors=True)
    shutil.copytree(source, edited)
    for path in fields:
        manifest = json.load(open(f"{source}/manifest.json"))
        *parents, key = path.split(".")
        target = manifest
        for parent in parents:
            target = target[parent]
        target[key] = HUGE
        json.dump(manifest, open(f"{edited}/manifest.json", "w"))
        run = subprocess.run([hypipe_run, edited, "--steps", "1"],
                             capture_output=True, text=True)
        # The spec's name may be longer (microbatch_group_size_per_vp_stage).
        said = [f" is {HUGE}, more than the ", key]
        if run.returncode == 0 or "bad_alloc" in run.stderr or \
                not all(part in run.stderr for part in said):
            failures.append(f"{path}: exit {run.returncode}: {run.stderr}")
for f in failures:
    print(f)
print(f"{sum(map(len, FIELDS.values()))} fields, {len(failures)} not refused")
sys.exit(1 if failures else 0)
