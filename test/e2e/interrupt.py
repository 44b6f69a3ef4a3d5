#!/usr/bin/python3
"""Ctrl-C on `hypipe train`: starts it, waits for a few steps, sends SIGINT
as a terminal would (or SIGTERM, as Slurm and `kill` do, with --signal
SIGTERM), and checks that every rank stopped cleanly after a step, saved a
checkpoint, and left no process behind. A bare `hypipe-run RUN_DIR/artifact
--json-log RUN_DIR/log.jsonl --save RUN_DIR/ckpt` (one process, or under
mpirun as srun would start it) is checked the same way.

With --to-ranks the signal goes to every rank rather than to COMMAND, as
Slurm sends it to every task of a job step before its time limit; COMMAND's
exit code is then mpirun's (Open MPI's 1 for ranks that exit 130), which is
printed but not checked.

usage: interrupt.py RUN_DIR [--signal NAME] [--to-ranks] COMMAND..."""
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
to_ranks = cmd[0] == "--to-ranks"
if to_ranks:
    cmd = cmd[1:]
ranks_pattern = "hypipe-run " + os.path.join(run_dir, "artifact")


def ranks():
    """The ranks' pids (not this script's, whose command line names them)."""
    found = subprocess.run(["pgrep", "-f", ranks_pattern], capture_output=True,
                           text=True).stdout.split()
    return [int(p) for p in found if int(p) != os.getpid()]


proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
log = os.path.join(run_dir, "log.jsonl")
wait_for_steps(proc, log)
if to_ranks:
    for pid in ranks():
        os.kill(pid, sent)
else:
    proc.send_signal(sent)
try:
    out, _ = proc.communicate(timeout=60)
except subprocess.TimeoutExpired:
    proc.kill()
    sys.exit("FAIL: %s still running 60 s after %s" % (cmd[0], sent.name))
print(out)
steps = [json.loads(l)["step"] for l in open(log)]
latest = open(os.path.join(run_dir, "ckpt", "latest")).read().strip()
left = ranks()
print("exit code %d, last logged step %d, latest checkpoint %s, %d ranks left"
      % (proc.returncode, steps[-1], latest, len(left)))
ok = ((to_ranks or proc.returncode == 130) and latest == "step_%08d" % steps[-1]
      and not left and steps[-1] < 400)
sys.exit(0 if ok else 1)
