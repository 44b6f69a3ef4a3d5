#!/bin/bash
# A launch agent (mpirun --mca plm_rsh_agent) for whom host 10.S.0.2 is a
# machine whose ssh port accepts the connection and never speaks: the agent
# connects to port 2222 there (silent_listener.py) and waits for a banner
# that never comes, as ssh does. Every other host goes to agent.sh.
host=$1
if [[ ${host##*.} == 2 ]]; then
  exec python3 -c 'import socket, sys; s = socket.create_connection((sys.argv[1], 2222)); s.recv(1)' "$host"
fi
exec "$(dirname "$0")/../../scripts/multihost/agent.sh" "$@"
