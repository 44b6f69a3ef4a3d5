#!/bin/bash
# Open MPI's launch agent for the stand-in hosts of hosts.sh (mpirun --mca
# plm_rsh_agent): runs the command in the network namespace of the host it
# names, 10.S.0.(i+1) being namespace $HYPIPE_HOSTS_PREFIX$i.
host=$1
shift
exec ip netns exec "${HYPIPE_HOSTS_PREFIX:?}$(( ${host##*.} - 1 ))" /bin/sh -c "$*"
