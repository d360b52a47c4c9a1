# scripts/netns-nodes.sh — two "nodes" on one machine for multi-node MPI runs (sourced, not run).
#
# Two network namespaces, each with its own host name and address, joined through veth pairs to a bridge
# in a third namespace; each node's link is shaped (tc tbf) in both directions. Open MPI starts the second
# node's ranks through a small launch agent that enters its namespace, so a job sees two hosts: shared
# memory inside a node, TCP between them. Used by bench/overlap.sh, bench/compress.sh and test/e2e/modes_netns.sh.
#
# The caller sets NS (a prefix: namespaces ${NS}1, ${NS}2, ${NS}br), NET (the first three octets of the
# nodes' addresses, e.g. 10.79.0) and TMP (a scratch folder), then:
#   netns_missing                      prints why the nodes cannot be made here (empty: they can)
#   netns_make RATE                    makes them, links at RATE (e.g. 1gbit); non-zero on failure
#   netns_set_rate RATE                reshapes both links
#   netns_link_bytes I                 bytes through node I's link so far, both directions
#   netns_mpirun MPIRUN-ARGS...        mpirun from node 1 across both nodes (2 slots each, TCP between them)
#   netns_teardown                     kills what runs inside and deletes the namespaces
#   netns_bench_begin NAME KEEP BINARY  a benchmark's start (bench/overlap.sh, bench/compress.sh): says
#                                      "NAME: skipped: why" and exits 0 where BINARY or the nodes are missing;
#                                      else makes TMP, the nodes (1 Gbit/s) and an exit trap that tears them
#                                      down and keeps TMP when $KEEP is set; exports the MPI settings of the runs

netns_missing() {
  [ "$(id -u)" -eq 0 ] || { echo "making network namespaces needs root"; return; }
  local tool
  for tool in ip tc unshare; do command -v $tool >/dev/null || { echo "needs $tool (iproute2, util-linux)"; return; }; done
  ip netns list 2>/dev/null | grep -qE "^${NS}(1|2|br)\b" && echo "namespaces ${NS}* exist already (another run?)"
}

netns_make() {
  local rate=$1 i
  ip netns add ${NS}br && ip -n ${NS}br link add sw type bridge && ip -n ${NS}br link set sw up || return 1
  for i in 1 2; do
    ip netns add ${NS}$i || return 1
    ip link add ${NS}v$i type veth peer name ${NS}p$i || return 1
    ip link set ${NS}v$i netns ${NS}$i && ip link set ${NS}p$i netns ${NS}br || return 1
    ip -n ${NS}br link set ${NS}p$i master sw && ip -n ${NS}br link set ${NS}p$i up || return 1
    ip -n ${NS}$i addr add $NET.$i/24 dev ${NS}v$i && ip -n ${NS}$i link set ${NS}v$i up || return 1
    ip -n ${NS}$i link set lo up || return 1
    # Shaped in both directions: out of the node at its end, into the node at the switch's end.
    ip netns exec ${NS}$i tc qdisc add dev ${NS}v$i root tbf rate "$rate" burst 256kb latency 100ms || return 1
    ip netns exec ${NS}br tc qdisc add dev ${NS}p$i root tbf rate "$rate" burst 256kb latency 100ms || return 1
  done
  # Open MPI reaches the "remote" node with `AGENT HOST COMMAND...`: enter that node's namespace, as its host.
  cat >"$TMP/netns-agent" <<AGENT
#!/bin/sh
host=\$1; shift
node=node\${host##*.}
exec ip netns exec ${NS}\${host##*.} unshare --uts /bin/sh -c "hostname \$node; \$*"
AGENT
  chmod +x "$TMP/netns-agent"
  printf '%s slots=2\n' $NET.1 $NET.2 >"$TMP/netns-hosts"
}

netns_set_rate() {
  local i
  for i in 1 2; do
    ip netns exec ${NS}$i tc qdisc change dev ${NS}v$i root tbf rate "$1" burst 256kb latency 100ms || return 1
    ip netns exec ${NS}br tc qdisc change dev ${NS}p$i root tbf rate "$1" burst 256kb latency 100ms || return 1
  done
}

netns_link_bytes() {
  local d=/sys/class/net/${NS}v$1/statistics
  ip netns exec ${NS}$1 sh -c "echo \$((\$(cat $d/tx_bytes) + \$(cat $d/rx_bytes)))"
}

netns_mpirun() {  # bounded: a hang ends that run, not the caller
  timeout 900 ip netns exec ${NS}1 unshare --uts /bin/sh -c 'hostname node1; exec mpirun "$@"' sh \
    --oversubscribe --mca plm_rsh_agent "$TMP/netns-agent" --hostfile "$TMP/netns-hosts" \
    --mca btl self,vader,tcp --mca oob_tcp_if_include $NET.0/24 --mca btl_tcp_if_include $NET.0/24 "$@"
}

netns_teardown() {
  local ns
  for ns in ${NS}1 ${NS}2 ${NS}br; do
    ip netns pids $ns 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns del $ns 2>/dev/null
  done
}

netns_bench_begin() {
  local name=$1 keep=$2 binary=$3
  [ -x "$binary" ] || { echo "$name: skipped: $binary is not built"; exit 0; }
  local why
  why=$(netns_missing)
  [ -z "$why" ] || { echo "$name: skipped: $why"; exit 0; }
  TMP=$(mktemp -d "/tmp/hetrain-bench-$name.XXXXXX")
  NETNS_BENCH_NAME=$name NETNS_BENCH_KEEP=$keep
  trap 'netns_teardown
        if [ -n "${!NETNS_BENCH_KEEP:-}" ]; then echo "$NETNS_BENCH_NAME: metrics and logs kept in $TMP"; else rm -rf "$TMP"; fi' EXIT
  netns_make 1gbit 2>"$TMP/setup.err" \
    || { echo "$name: skipped: could not make the namespaces: $(head -1 "$TMP/setup.err")"; exit 0; }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  export OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_base_warn_component_unused=0
}
