#!/usr/bin/env bash
# Starts (start) or stops (stop) a one-machine Slurm cluster for hetrain's own tests: munged, slurmctld
# and two slurmd with a config written to /etc/slurm/slurm.conf (when none exists, or when the existing one
# is ours: it holds the marker hetrain-local). Root only. Stops only the daemons it started (pid files under
# /run/slurm-local).
#
# Two Slurm nodes on the one machine, each its own slurmd on its own port: NODE (partition debug, the
# default) and NODE-b (partition second). Slurm never places two components of a heterogeneous job on one
# node, so jobs/hetjob.sbatch needs two nodes to run here; its test takes one component from each partition.
#
# When the daemons already run but the config written now differs from the one they read (a partition was
# added, the node's CPU count changed), start makes them read it: `scontrol reconfigure` first, a restart of
# both daemons when that is not enough. Jobs survive either (their state is saved).
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
    node=$(hostname -s)
    mkdir -p $RUN /var/lib/slurm/slurmctld /var/lib/slurm/slurmd-$node /var/lib/slurm/slurmd-$node-b /var/log/slurm
    want=$RUN/slurm.conf.new
    cat > "$want" <<CONF
# hetrain-local: written by scripts/slurm-local.sh for the project's tests
ClusterName=local
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd-%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
ReturnToService=2
NodeName=$node NodeHostname=$node NodeAddr=127.0.0.1 Port=6818 CPUs=$(getconf _NPROCESSORS_ONLN) State=UNKNOWN
NodeName=$node-b NodeHostname=$node NodeAddr=127.0.0.1 Port=6828 CPUs=$(getconf _NPROCESSORS_ONLN) State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=second Nodes=$node-b Default=NO MaxTime=INFINITE State=UP
CONF
    if [ ! -f /etc/slurm/slurm.conf ] || grep -q "hetrain-local" /etc/slurm/slurm.conf; then
      cmp -s "$want" /etc/slurm/slurm.conf || cp "$want" /etc/slurm/slurm.conf
    fi
    rm -f "$want"
    if ! pgrep -x munged >/dev/null; then
      install -d -o munge -g munge /run/munge
      [ -f /etc/munge/munge.key ] || /usr/sbin/mungekey --create >/dev/null 2>&1 || true
      daemon runuser -u munge -- /usr/sbin/munged && touch $RUN/munged.started-here
    fi
    # $RUN/slurm.conf.loaded: the config the running daemons read (copied whenever they start or reread).
    if pgrep -x slurmctld >/dev/null && ! cmp -s /etc/slurm/slurm.conf $RUN/slurm.conf.loaded; then
      echo "slurm-local: the config changed; the running daemons reread it" >&2
      reread=0
      if timeout 30 scontrol reconfigure >/dev/null 2>&1; then
        # reconfigure cannot change everything (nodes' hardware, for one): check what the controller sees.
        for _ in $(seq 25); do
          parts=$(timeout 5 sinfo -h -o %R 2>/dev/null | sort | tr '\n' ' ' || true)
          nodes=$(timeout 5 sinfo -h -N -o '%N:%c' 2>/dev/null | sort -u | tr '\n' ' ' || true)
          want_parts=$(sed -n 's/^PartitionName=\([^ ]*\).*/\1/p' /etc/slurm/slurm.conf | sort | tr '\n' ' ')
          want_nodes=$(sed -n 's/^NodeName=\([^ ]*\) .* CPUs=\([0-9]*\).*/\1:\2/p' /etc/slurm/slurm.conf | sort | tr '\n' ' ')
          [ "$parts" = "$want_parts" ] && [ "$nodes" = "$want_nodes" ] && { reread=1; break; }
          sleep 0.2
        done
      fi
      if [ $reread -eq 0 ]; then
        echo "slurm-local: reconfigure was not enough; restarting slurmctld and slurmd" >&2
        "$0" stop-slurm
      fi
    fi
    pgrep -x slurmctld >/dev/null || daemon /usr/sbin/slurmctld
    for n in $node $node-b; do
      running=0
      [ -f $RUN/slurmd-$n.pid ] && kill -0 "$(cat $RUN/slurmd-$n.pid)" 2>/dev/null && running=1
      [ $running -eq 1 ] || daemon /usr/sbin/slurmd -N $n
    done
    cp /etc/slurm/slurm.conf $RUN/slurm.conf.loaded
    for _ in $(seq 75); do
      up=$(timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | grep -cE ' (idle|mixed|alloc)' || true)
      [ "$up" -ge 2 ] && exit 0
      sleep 0.2
    done
    echo "slurm-local: the nodes did not come up (see /var/log/slurm/)" >&2; exit 1 ;;
  stop|stop-slurm)  # stop-slurm: slurmd and slurmctld only, munged stays (a restart after a config change)
    pids=()
    for f in $RUN/slurmd*.pid $RUN/slurmctld.pid; do [ -f "$f" ] && pids+=("$(cat "$f")"); done
    rm -f $RUN/slurm.conf.loaded
    if [ "$1" = stop ] && [ -f $RUN/munged.started-here ]; then
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
