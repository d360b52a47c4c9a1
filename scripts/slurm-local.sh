#!/usr/bin/env bash
# Starts (start) or stops (stop) a one-machine Slurm cluster for hetrain's own tests: munged, slurmctld
# and slurmd with a config written to /etc/slurm/slurm.conf (only when none exists). Root only. Stops only
# the daemons it started (pid files under /run/slurm-local).
set -euo pipefail
RUN=/run/slurm-local
# Starts a daemon without the caller's open files beyond stdin/out/err: a daemon that inherits, say, a
# build lock or a test runner's pipe would hold it for as long as it lives.
daemon() {
  (
    for fd in /proc/self/fd/*; do
      n=${fd##*/}
      [ "$n" -gt 2 ] 2>/dev/null && { eval "exec $n>&-" 2>/dev/null || true; }
    done
    exec "$@"
  )
}
case "${1:-}" in
  start)
    [ "$(id -u)" -eq 0 ] || { echo "slurm-local: must run as root" >&2; exit 1; }
    command -v slurmctld >/dev/null || { echo "slurm-local: Slurm is not installed (make deps)" >&2; exit 1; }
    mkdir -p $RUN /var/lib/slurm/slurmctld /var/lib/slurm/slurmd /var/log/slurm
    node=$(hostname -s)
    if [ ! -f /etc/slurm/slurm.conf ] || grep -q "hetrain-local" /etc/slurm/slurm.conf; then
      cat > /etc/slurm/slurm.conf <<CONF
# hetrain-local: written by scripts/slurm-local.sh for the project's tests
ClusterName=local
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
    fi
    if ! pgrep -x munged >/dev/null; then
      install -d -o munge -g munge /run/munge
      [ -f /etc/munge/munge.key ] || /usr/sbin/mungekey --create >/dev/null 2>&1 || true
      daemon runuser -u munge -- /usr/sbin/munged && touch $RUN/munged.started-here
    fi
    pgrep -x slurmctld >/dev/null || daemon /usr/sbin/slurmctld
    pgrep -x slurmd >/dev/null || daemon /usr/sbin/slurmd
    for _ in $(seq 50); do timeout 5 sinfo -h -o %T 2>/dev/null | grep -qE 'idle|mixed|alloc' && exit 0; sleep 0.2; done
    echo "slurm-local: the node did not come up (see /var/log/slurm/)" >&2; exit 1 ;;
  stop)
    pids=()
    for d in slurmd slurmctld; do [ -f $RUN/$d.pid ] && pids+=("$(cat $RUN/$d.pid)"); done
    if [ -f $RUN/munged.started-here ]; then
      pids+=($(pgrep -x munged))
      rm -f $RUN/munged.started-here
    fi
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
    # slurmctld and munged take a while to exit (slurmctld's pid file goes first): wait for the processes,
    # so that a start right after this one does not find a dying daemon.
    for _ in $(seq 100); do
      alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive -eq 0 ] && break
      sleep 0.2
    done ;;
  *) echo "usage: scripts/slurm-local.sh start|stop" >&2; exit 2 ;;
esac
