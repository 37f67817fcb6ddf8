#!/bin/sh
# A single-node Slurm cluster on this machine, for trying and testing
# bs_batch(backend = "future") under future.batchtools::batchtools_slurm.
#
#   sh tools/slurm-cluster.sh start    # set up and start (idempotent)
#   sh tools/slurm-cluster.sh status   # exit 0 when the cluster takes jobs
#   sh tools/slurm-cluster.sh stop     # cancel its jobs, stop its daemons
#
# Everything lives in one private directory ($WISPACK_SLURM_DIR, default
# /tmp/wispack-slurm): slurm.conf, a munge key and socket of its own, spool,
# state, logs and pid files. Nothing under /etc is changed, and a system
# munged or Slurm is left alone (the daemons listen on 127.0.0.1, ports
# $WISPACK_SLURM_PORT and the next one, default 16817 and 16818). Slurm's
# clients find the cluster through SLURM_CONF, which `start` prints:
#
#   export SLURM_CONF=/tmp/wispack-slurm/slurm.conf
#
# `start` installs slurm-wlm, munge and r-cran-future.batchtools with apt
# when they are missing. It needs root: slurmd runs jobs as their owners.
# When the cluster cannot be set up, `start` says why on a line beginning
# "Slurm cannot be set up here:" and exits with status 2.
set -u

dir=${WISPACK_SLURM_DIR:-/tmp/wispack-slurm}
port=${WISPACK_SLURM_PORT:-16817}
conf="$dir/slurm.conf"
socket="$dir/munge/munge.socket"
node=$(hostname -s 2>/dev/null || echo localhost)
packages="slurm-wlm munge r-cran-future.batchtools"
SLURM_CONF=$conf
export SLURM_CONF

say() { echo "slurm-cluster: $*"; }

cannot() {
  echo "Slurm cannot be set up here: $*" >&2
  for log in "$dir/log/munged.log" "$dir/log/slurmctld.log" "$dir/log/slurmd.log"; do
    if [ -s "$log" ]; then
      echo "--- last lines of $log" >&2
      tail -n 5 "$log" >&2
    fi
  done
  stop_daemons >/dev/null 2>&1
  exit 2
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Polls `$@` every 0.2 s for up to $timeout seconds; true once it succeeds.
wait_for() {
  timeout=$1
  shift
  tries=$((timeout * 5))
  while [ "$tries" -gt 0 ]; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
    tries=$((tries - 1))
  done
  return 1
}

node_ready() {
  state=$(sinfo -h -n "$node" -o %T 2>/dev/null | head -n 1)
  case "$state" in idle | mixed | allocated) return 0 ;; *) return 1 ;; esac
}

running() {
  alive "$dir/munged.pid" && alive "$dir/slurmctld.pid" && alive "$dir/slurmd.pid" &&
    node_ready
}

# TERM the daemons whose pid files are given, all at once; KILL any still
# there after 10 s.
stop_pid_files() {
  pids=""
  for file in "$@"; do
    if alive "$file"; then
      pid=$(cat "$file")
      kill "$pid" 2>/dev/null && pids="$pids $pid"
    fi
  done
  for pid in $pids; do
    if ! wait_for 10 sh -c "! kill -0 $pid"; then kill -9 "$pid" 2>/dev/null; fi
  done
  rm -f "$@"
}

stop_daemons() {
  if alive "$dir/slurmctld.pid"; then
    jobs=$(squeue -h -o %i 2>/dev/null)
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086 # one job id per word
      scancel $jobs 2>/dev/null
      wait_for 15 sh -c '[ -z "$(squeue -h -o %i)" ]'
    fi
  fi
  stop_pid_files "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"
  rm -f "$socket" "$socket.lock"
}

install_missing() {
  missing=""
  for package in $packages; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
      missing="$missing $package"
    fi
  done
  [ -z "$missing" ] && return 0
  command -v apt-get >/dev/null 2>&1 || cannot "$missing missing, and there is no apt-get to install them"
  say "installing from Debian:$missing"
  # Debian's packages try to start system daemons; this cluster runs its own.
  if ! { apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing; } \
    >"$dir/log/apt.log" 2>&1; then
    tail -n 5 "$dir/log/apt.log" >&2
    cannot "apt-get could not install$missing (log: $dir/log/apt.log)"
  fi
}

write_conf() {
  cpus=$(nproc)
  # Declare 90 % of the memory so that slurmd's own measurement never falls
  # short of it (which would drain the node); --mem requests are checked
  # against it.
  memory=$(awk '/^MemTotal:/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
  cat >"$conf" <<EOF
# Written by tools/slurm-cluster.sh: a one-node cluster on 127.0.0.1.
ClusterName=wispack
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups: not needed on one node, and often unavailable in a VM.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
# Memory is a consumable resource (a job without --mem gets DefMemPerCPU per
# CPU), and a job's memory is polled every second: one over its --mem is
# killed, and its log says so. No accounting database is needed for that.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((memory / cpus))
# A cancelled or timed-out job is killed 2 s after its SIGTERM.
KillWait=2
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=main Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  if running; then
    say "already running"
    echo "export SLURM_CONF=$conf"
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || cannot "it needs root (slurmd runs jobs as their owners); run this script as root"
  # Start clean: stop whatever part of an earlier cluster is left.
  stop_daemons
  mkdir -p "$dir/munge" "$dir/spool" "$dir/state" "$dir/log" || cannot "cannot create $dir"
  chmod 700 "$dir" "$dir/munge"
  install_missing
  for program in munged munge unmunge slurmctld slurmd sinfo squeue sbatch scancel; do
    command -v "$program" >/dev/null 2>&1 || cannot "$program is not installed"
  done

  if [ ! -s "$dir/munge/munge.key" ]; then
    dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null ||
      cannot "cannot write a munge key"
  fi
  chmod 400 "$dir/munge/munge.key"
  munged --force --socket="$socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" || cannot "munged did not start"
  wait_for 10 sh -c "munge -S '$socket' -n | unmunge -S '$socket'" ||
    cannot "munge does not answer on $socket"

  write_conf
  slurmctld -c -f "$conf" || cannot "slurmctld did not start"
  wait_for 20 scontrol ping || cannot "slurmctld does not answer on 127.0.0.1:$port"
  slurmd -f "$conf" -N "$node" || cannot "slurmd did not start"
  wait_for 30 node_ready ||
    cannot "node $node did not become idle ($(sinfo -h -o '%T %E' 2>/dev/null))"
  say "running: 1 node ($node, $(nproc) CPUs), partition main; files in $dir"
  echo "export SLURM_CONF=$conf"
}

case "${1:-}" in
  start) start ;;
  stop)
    stop_daemons
    say "stopped"
    ;;
  status)
    if running; then
      say "running"
      sinfo
      echo "export SLURM_CONF=$conf"
    else
      say "not running"
      exit 3
    fi
    ;;
  *)
    echo "usage: sh tools/slurm-cluster.sh start|stop|status" >&2
    exit 64
    ;;
esac
