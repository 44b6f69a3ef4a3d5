#!/bin/bash
# Open MPI's launch agent for the stand-in hosts of hosts.sh (mpirun --mca
# plm_rsh_agent): runs the command in the network namespace of the host it
# names, 10.S.0.(i+1) being namespace $HYPIPE_HOSTS_PREFIX$i, under that
# namespace's name as its hostname (its own UTS namespace): Open MPI names a
# host's session directory after its hostname, and daemons of one name on
# the one file system raced to create the same directory.
host=$1
shift
ns="${HYPIPE_HOSTS_PREFIX:?}$(( ${host##*.} - 1 ))"
exec ip netns exec "$ns" unshare --uts /bin/sh -c "hostname $ns && $*"
