#!/usr/bin/python3
"""Sends Ctrl-C to `hypipe train` while its launcher has started no rank
(HYPIPE_MPIRUN names a launcher that hangs), and reports how long it took to
end, its exit code, its last message and whether any process of the launch
is left (a `sleep` the fake launcher started, tagged by MARK).

usage: interrupt_launch.py MARK hypipe train SPEC [options...]"""
import signal
import subprocess
import sys
import time

mark, cmd = sys.argv[1], sys.argv[2:]
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
time.sleep(2.0)  # compiled and launched; the launcher hangs
start = time.monotonic()
proc.send_signal(signal.SIGINT)
try:
    _, err = proc.communicate(timeout=30)
except subprocess.TimeoutExpired:
    proc.kill()
    _, err = proc.communicate()
took = time.monotonic() - start
time.sleep(1)
left = subprocess.run(["pgrep", "-f", "^" + mark], capture_output=True, text=True).stdout.split()
last = [l for l in err.splitlines() if l.strip()][-1:] or [""]
print("ended within %s s, exit code %d, %d processes left" %
      ("10" if took < 10 else "%.0f" % took, proc.returncode, len(left)))
print("last: " + last[0])
