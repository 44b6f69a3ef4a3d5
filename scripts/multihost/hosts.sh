#!/usr/bin/env bash
# Stand-in hosts on one machine (issue 38, docs/runtime.md "Several hosts"):
# N network namespaces PREFIX0..PREFIX{N-1}, each a "host" with its own
# address 10.SUBNET.0.(i+1)/24 on a veth pair into a bridge, so Open MPI
# starts ranks in them through scripts/multihost/agent.sh and they talk TCP
# as separate machines would. Needs root and a kernel that allows network
# namespaces.
#
#   hosts.sh up PREFIX N SUBNET    (re)create the hosts
#   hosts.sh down PREFIX N         remove them
#   hosts.sh cut PREFIX I          take host I's link down (a lost host)
#   hosts.sh check                 exit 0 when this machine can make hosts
set -euo pipefail
cmd=${1:-}
case $cmd in
check)
  [[ $(id -u) -eq 0 ]] || { echo "not root"; exit 1; }
  command -v ip > /dev/null || { echo "no ip (iproute2)"; exit 1; }
  probe=hypipe-probe-$$
  ip netns add "$probe" 2> /dev/null || { echo "the kernel refuses network namespaces"; exit 1; }
  ip netns del "$probe"
  ip link add "hpb$$" type bridge 2> /dev/null || { echo "no bridge devices (ip link add type bridge failed)"; exit 1; }
  ip link del "hpb$$"
  ip link add "hpv$$" type veth peer name "hpp$$" 2> /dev/null || { echo "no veth pairs (ip link add type veth failed)"; exit 1; }
  ip link del "hpv$$"
  command -v mpirun > /dev/null || { echo "no mpirun"; exit 1; }
  ;;
up)
  prefix=$2 n=$3 subnet=$4
  "$0" down "$prefix" "$n"
  ip link add "${prefix}br" type bridge
  ip link set "${prefix}br" up
  for ((i = 0; i < n; ++i)); do
    ip netns add "$prefix$i"
    ip link add "${prefix}v$i" type veth peer name "${prefix}p$i"
    ip link set "${prefix}p$i" netns "$prefix$i"
    ip link set "${prefix}v$i" master "${prefix}br" up
    ip -n "$prefix$i" link set lo up
    ip -n "$prefix$i" link set "${prefix}p$i" name eth0
    ip -n "$prefix$i" addr add "10.$subnet.0.$((i + 1))/24" dev eth0
    ip -n "$prefix$i" link set eth0 up
  done
  ;;
down)
  prefix=$2 n=$3
  for ((i = 0; i < n; ++i)); do
    # What a lost host left running (Open MPI's daemon) goes with it.
    ip netns pids "$prefix$i" 2> /dev/null | xargs -r kill -9 2> /dev/null || true
    ip netns del "$prefix$i" 2> /dev/null || true
    ip link del "${prefix}v$i" 2> /dev/null || true
  done
  ip link del "${prefix}br" 2> /dev/null || true
  ;;
cut)
  ip -n "$2$3" link set eth0 down
  ;;
*)
  echo "usage: hosts.sh up PREFIX N SUBNET | down PREFIX N | cut PREFIX I | check" >&2
  exit 2
  ;;
esac
