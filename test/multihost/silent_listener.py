#!/usr/bin/python3
"""Accepts TCP connections on PORT and never answers (a host whose ssh
port is open and whose sshd hangs), for at most SECONDS.

usage: silent_listener.py PORT SECONDS"""
import socket
import sys
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", port))
server.listen(16)
server.settimeout(0.5)
held, end = [], time.monotonic() + seconds
while time.monotonic() < end:
    try:
        held.append(server.accept()[0])
    except socket.timeout:
        pass
