#!/usr/bin/python3
"""Compares the losses of two hypipe-run --json-log files.

usage: compare_logs.py A B same|different"""
import json
import sys

a = [json.loads(l)["loss"] for l in open(sys.argv[1])]
b = [json.loads(l)["loss"] for l in open(sys.argv[2])]
same = a == b
print("losses %s: %s vs %s" % ("identical" if same else "differ", a, b))
sys.exit(0 if same == (sys.argv[3] == "same") else 1)
