#!/usr/bin/python3
"""A rank that stops making progress: starts COMMAND (a 2-rank job whose
artifact is ARTIFACT), waits until 3 steps are logged to LOG, stops one rank
with SIGSTOP, and measures the CPU the other burns while it waits. With
--ctrl-c it then sends SIGINT to COMMAND (hypipe train) after 1 s, as a user
would. Reports how long the job took to end after the stop, its exit code,
the waiting rank's CPU share, and the ranks left (the stopped one is
continued and killed afterwards, whatever the verdict).

usage: stop_rank.py [--ctrl-c] ARTIFACT LOG COMMAND..."""
import os
import signal
import subprocess
import sys
import time

from runs import wait_for_steps

ctrl_c = sys.argv[1] == "--ctrl-c"
args = sys.argv[2:] if ctrl_c else sys.argv[1:]
artifact, log, cmd = args[0], args[1], args[2:]
proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wait_for_steps(proc, log)
def ranks():
    """The rank processes: their command line names the artifact, and their
    name is hypipe-run's (or "exe": hypipe-run re-executes itself)."""
    found = []
    for p in subprocess.run(["pgrep", "-f", "hypipe-run " + artifact + "( |$)"],
                            capture_output=True, text=True).stdout.split():
        try:
            if open("/proc/%s/comm" % p).read().strip() in ("exe", "hypipe-run"):
                found.append(int(p))
        except OSError:
            pass
    return found
def cpu(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
pids = ranks()
if len(pids) != 2:
    proc.terminate()  # mpirun ends its ranks on SIGTERM
    sys.exit("FAIL: found %d rank processes, not 2" % len(pids))
stopped, waiting = pids[-1], pids[0]
os.kill(stopped, signal.SIGSTOP)
start = time.time()
time.sleep(1)
c0, t0 = cpu(waiting), time.time()
time.sleep(2)
share = (cpu(waiting) - c0) / (time.time() - t0)
if ctrl_c:
    proc.send_signal(signal.SIGINT)
try:
    _, err = proc.communicate(timeout=60)
except subprocess.TimeoutExpired:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    err = "FAIL: still running 60 s after the stop"
took = time.time() - start
for pid in ranks():
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
print(err.strip())
print("ended %s after the stop, exit code %d, waiting rank used %s of a core, %d ranks left"
      % ("within 30 s" if took < 30 else "after %.0f s" % took, proc.returncode,
         "under half" if share < 0.5 else "%.0f%%" % (100 * share), len(ranks())))
