#!/usr/bin/python3
"""Sends SIGNAL to `hypipe train` once it has logged 3 steps and reports how
many of its ranks are still alive 10 s later (none may be: the ranks die with
hypipe train however it ends, SIGKILL included). SIGNAL "SIGINT2" is two
quick Ctrl-C.

usage: signal_train.py RUN_DIR SIGNAL hypipe train SPEC [options...]"""
import os
import signal
import subprocess
import sys
import time

from runs import wait_for_steps

run_dir, name, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
log = os.path.join(run_dir, "log.jsonl")
wait_for_steps(proc, log)
pattern = "hypipe-run " + os.path.join(run_dir, "artifact")
alive = lambda: subprocess.run(["pgrep", "-f", pattern], capture_output=True,
                               text=True).stdout.split()
before = len(alive())
if name == "SIGINT2":
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
else:
    proc.send_signal(getattr(signal, name))
try:
    _, err = proc.communicate(timeout=30)
except subprocess.TimeoutExpired:
    proc.terminate()
    sys.exit("FAIL: hypipe train still running 30 s after %s" % name)
deadline = time.time() + 10
while alive() and time.time() < deadline:
    time.sleep(0.1)
left = alive()
for pid in left:  # leave nothing behind, whatever the verdict
    os.kill(int(pid), signal.SIGKILL)
print(err.strip())
print("%s: exit code %d, %d ranks before, %d ranks left" % (name, proc.returncode, before, len(left)))
sys.exit(0 if before > 0 and not left else 1)
