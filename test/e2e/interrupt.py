#!/usr/bin/python3
"""Ctrl-C on `hypipe train`: starts it, waits for a few steps, sends SIGINT
as a terminal would (or SIGTERM, as Slurm and `kill` do, with --signal
SIGTERM), and checks that every rank stopped cleanly after a step, saved a
checkpoint, and left no process behind.

usage: interrupt.py RUN_DIR [--signal NAME] hypipe train SPEC [options...]"""
import json
import os
import signal
import subprocess
import sys
import time

from runs import wait_for_steps

run_dir, cmd = sys.argv[1], sys.argv[2:]
sent = signal.SIGINT
if cmd[0] == "--signal":
    sent, cmd = getattr(signal, cmd[1]), cmd[2:]
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
log = os.path.join(run_dir, "log.jsonl")
wait_for_steps(proc, log)
proc.send_signal(sent)
try:
    out, _ = proc.communicate(timeout=60)
except subprocess.TimeoutExpired:
    proc.kill()
    sys.exit("FAIL: hypipe train still running 60 s after %s" % sent.name)
print(out)
steps = [json.loads(l)["step"] for l in open(log)]
latest = open(os.path.join(run_dir, "ckpt", "latest")).read().strip()
left = subprocess.run(["pgrep", "-f", "hypipe-run " + os.path.join(run_dir, "artifact")],
                      capture_output=True, text=True).stdout.split()
print("exit code %d, last logged step %d, latest checkpoint %s, %d ranks left"
      % (proc.returncode, steps[-1], latest, len(left)))
ok = (proc.returncode == 130 and latest == "step_%08d" % steps[-1] and not left
      and steps[-1] < 400)
sys.exit(0 if ok else 1)
