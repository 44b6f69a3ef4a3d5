"""Helpers for the tests that drive a training run from outside."""
import os
import sys
import time


def wait_for_steps(proc, log, steps=3, seconds=60):
    """Waits until `log` (a JSON log) holds `steps` lines; ends `proc` (mpirun
    ends its ranks on SIGTERM) and fails the test if that takes longer."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(log) and len(open(log).readlines()) >= steps:
            return
        time.sleep(0.05)
    proc.terminate()
    sys.exit("FAIL: no %d steps logged within %d s" % (steps, seconds))
