#!/usr/bin/python3
"""Checks the distributed optimizer's saving in measured memory: the peak
tensor bytes each rank's device held (the traces' otherData.memory_mib,
measured by hypipe-run) of an unsharded and a sharded run of one artifact
layout differ by the AdamW moments the other dp ranks now hold: per pipeline
rank, 2 moments x (P - ceil(P / dp)) floats, where P is that rank's
parameter count from the manifest (the moments' padding aside).

usage: check_sharded_memory.py PLAIN_TRACE SHARDED_TRACE ARTIFACT"""
import json
import os
import sys

plain = json.load(open(sys.argv[1]))["otherData"]["memory_mib"]
sharded = json.load(open(sys.argv[2]))["otherData"]["memory_mib"]
manifest = json.load(open(os.path.join(sys.argv[3], "manifest.json")))
par = manifest["parallel"]
pp, dp = par["pp"], par["dp"]
ok = True
for world in range(pp * dp):
    rank = world // dp
    blocks = [-(-s["num_params"] // dp) for s in manifest["stages"]
              if s["pp_rank"] == rank]
    params = sum(s["num_params"] for s in manifest["stages"] if s["pp_rank"] == rank)
    # Sharded: params and grads padded to dp blocks, moments one block.
    expected = (4 * params - sum(2 * dp * b + 2 * b for b in blocks)) * 4 / 2**20
    saved = plain[world][0] - sharded[world][0]
    good = abs(saved - expected) <= 0.01 * expected
    ok &= good
    print("rank %d: %.4f MiB less (expected %.4f, the moments of %d of %d dp ranks) %s"
          % (world, saved, expected, dp - 1, dp, "ok" if good else "WRONG"))
print("memory saving %s" % ("as expected" if ok else "NOT as expected"))
sys.exit(0 if ok else 1)
