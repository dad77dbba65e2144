#!/usr/bin/env bash
# scripts/netns-cluster.sh — an emulated cluster of N "nodes" on this machine.
#
#   scripts/netns-cluster.sh up N RATE        # e.g. up 4 1gbit
#   scripts/netns-cluster.sh down N
#   scripts/netns-cluster.sh run N RATE -- CMD ARGS...   # up, run CMD, always down (trap)
#
# Node k is network namespace dptwin-n<k> with interface veth0 = 10.77.0.<k+1>/24;
# its peer dptwin-v<k> sits in namespace dptwin-sw on bridge br0 (the switch).
# Both directions of every node link are shaped to RATE with tbf (per-direction
# bandwidth, like a switch port). Traffic only ever flows between these
# namespaces. Needs root (CAP_NET_ADMIN). Latency: tc netem is used when the
# kernel has it (DELAY env, e.g. DELAY=100us); otherwise the veth latency stays
# (~10-30 us) and a note is printed. The topology YAML the simulator uses for
# such a cluster is scenarios/validation/netns-<N>x-<RATE>.yaml.
set -euo pipefail

PREFIX=${DPTWIN_NETNS_PREFIX:-dptwin}
SW=${PREFIX}-sw

die() { echo "netns-cluster: $*" >&2; exit 2; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
command -v ip >/dev/null || die "needs iproute2 (ip)"
command -v tc >/dev/null || die "needs tc (iproute2)"

down() {
  local n=$1
  for ((k = 0; k < n; k++)); do ip netns del "${PREFIX}-n$k" 2>/dev/null || true; done
  ip netns del "$SW" 2>/dev/null || true
}

shape() {  # ns dev rate
  local ns=$1 dev=$2 rate=$3
  # burst: at least one 64 KiB TSO segment plus 1 ms at the rate.
  ip netns exec "$ns" tc qdisc replace dev "$dev" root handle 1: tbf rate "$rate" burst 256kb latency 100ms
  if [ -n "${DELAY:-}" ]; then
    if ! ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$DELAY" 2>/dev/null; then
      echo "netns-cluster: note: netem unavailable in this kernel; latency not added (veth latency only)" >&2
    fi
  fi
}

up() {
  local n=$1 rate=$2
  down "$n"
  ip netns add "$SW"
  ip -n "$SW" link add br0 type bridge
  ip -n "$SW" link set br0 up
  ip -n "$SW" link set lo up
  for ((k = 0; k < n; k++)); do
    local ns="${PREFIX}-n$k"
    ip netns add "$ns"
    ip link add "${PREFIX}-a$k" type veth peer name "${PREFIX}-v$k"
    ip link set "${PREFIX}-a$k" netns "$ns"
    ip link set "${PREFIX}-v$k" netns "$SW"
    ip -n "$ns" link set "${PREFIX}-a$k" name veth0
    ip -n "$ns" addr add "10.77.0.$((k + 1))/24" dev veth0
    ip -n "$ns" link set veth0 up
    ip -n "$ns" link set lo up
    ip -n "$SW" link set "${PREFIX}-v$k" master br0
    ip -n "$SW" link set "${PREFIX}-v$k" up
    shape "$ns" veth0 "$rate"
    shape "$SW" "${PREFIX}-v$k" "$rate"
  done
}

cmd=${1:-}; shift || true
case "$cmd" in
  up) [ $# -eq 2 ] || die "usage: up N RATE"; up "$1" "$2" ;;
  down) [ $# -eq 1 ] || die "usage: down N"; down "$1" ;;
  run)
    [ $# -ge 4 ] && [ "$3" = "--" ] || die "usage: run N RATE -- CMD..."
    n=$1 rate=$2; shift 3
    trap 'down "$n"' EXIT INT TERM HUP
    up "$n" "$rate"
    "$@"
    ;;
  *) die "usage: $0 up N RATE | down N | run N RATE -- CMD..." ;;
esac
