#!/usr/bin/env bash
# A one-node Slurm cluster in a directory (issue 38, docs/runtime.md "Several
# hosts"): munged with its own key and socket, slurmctld and slurmd with a
# slurm.conf that points at them, all state and logs under DIR. Needs root and
# Debian's slurmd, slurmctld, slurm-client and munge (scripts/setup.sh).
#
#   slurm.sh up DIR      start it; then SLURM_CONF=DIR/slurm.conf srun ...
#   slurm.sh down DIR    stop it
#   slurm.sh check       exit 0 when this machine can run it
set -euo pipefail
cmd=${1:-}
dir=${2:-}
case $cmd in
check)
  [[ $(id -u) -eq 0 ]] || { echo "not root"; exit 1; }
  for tool in munged slurmctld slurmd srun; do
    command -v "$tool" > /dev/null || { echo "no $tool (Debian's slurmd, slurmctld, slurm-client, munge)"; exit 1; }
  done
  ;;
up)
  "$0" down "$dir" 2> /dev/null || true
  mkdir -p "$dir"/{state,spool,log}
  dir=$(cd "$dir" && pwd)
  host=$(hostname -s)
  [[ -f $dir/munge.key ]] || head -c 1024 /dev/urandom > "$dir/munge.key"
  chmod 400 "$dir/munge.key"
  munged --force --key-file "$dir/munge.key" --socket "$dir/munge.socket" \
    --pid-file "$dir/munged.pid" --log-file "$dir/log/munged.log" \
    --seed-file "$dir/munge.seed"
  cat > "$dir/slurm.conf" << CONF
ClusterName=hypipe
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=${HYPIPE_SLURM_PORT:-16917}
SlurmdPort=$(( ${HYPIPE_SLURM_PORT:-16917} + 1 ))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
NodeName=$host CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
  slurmctld -f "$dir/slurm.conf"
  slurmd -f "$dir/slurm.conf"
  for _ in $(seq 50); do
    SLURM_CONF=$dir/slurm.conf sinfo -h -o %t 2> /dev/null | grep -q idle && exit 0
    sleep 0.2
  done
  echo "slurm.sh: the node did not become idle; see $dir/log" >&2
  exit 1
  ;;
down)
  pids=()
  for name in slurmd slurmctld munged; do
    [[ -f $dir/$name.pid ]] && pids+=("$(cat "$dir/$name.pid")")
  done
  ((${#pids[@]})) || exit 0
  kill "${pids[@]}" 2> /dev/null || true
  for _ in $(seq 50); do # gone before a new cluster takes the ports
    kill -0 "${pids[@]}" 2> /dev/null || exit 0
    sleep 0.1
  done
  kill -9 "${pids[@]}" 2> /dev/null || true
  ;;
*)
  echo "usage: slurm.sh up DIR | down DIR | check" >&2
  exit 2
  ;;
esac
