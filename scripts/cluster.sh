#!/usr/bin/env bash
# A multi-host testbed on one machine (issue #23 item 3): H "hosts" are Linux network
# namespaces, each with its own UTS name, joined by veth links through a bridge that lives in a
# namespace of its own; a host's egress is shaped with tc tbf (--link). COMMAND runs under
# mpirun across them, ranks host-major (host h = ranks h*R .. h*R+R-1): Open MPI's rsh launcher
# starts each host's daemon through an agent that enters the host's namespace, so ranks of one
# host talk over shared memory and ranks of different hosts over TCP on the private network.
#
#   bash scripts/cluster.sh --hosts H --ranks-per-host R [--link RATE] [--mpi-tcp tuned|default]
#                           [--timeout S] -- COMMAND ARGS...
#
# RATE is a tc rate (1gbit, 500mbit; default: unshaped); tbf caps the rate and bounds the queue,
# it adds no propagation delay (netem, which would, is not available everywhere this runs).
# --mpi-tcp: Open MPI's TCP settings, the testbed's (tuned, below) or Open MPI's own defaults. Addresses 10.231.0.1..H/24 exist only
# inside these namespaces; everything is removed at exit (also on error or Ctrl-C), and the
# whole run is killed after --timeout seconds (default 600). Root only (ip netns). Exit codes:
# COMMAND's; 77 when namespaces cannot be made here (CI skips with the printed reason); 2 bad use.
# Inside COMMAND: STRAGGLAR_CLUSTER_HOST0=10.231.0.1 (host 0's address: a TCPStore for torch/UCX).
set -euo pipefail

hosts=2 per_host=4 link="" timeout_s=600 mpi_tcp=tuned
usage() { echo "usage: $0 --hosts H --ranks-per-host R [--link RATE] [--mpi-tcp tuned|default] [--timeout S] -- COMMAND ARGS..." >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) hosts=$2; shift 2 ;;
    --ranks-per-host) per_host=$2; shift 2 ;;
    --link) link=$2; shift 2 ;;
    --mpi-tcp) mpi_tcp=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ $# -gt 0 ] || usage
[[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le 64 ] || { echo "cluster.sh: --hosts $hosts: expected 1..64" >&2; exit 2; }
[[ "$per_host" =~ ^[0-9]+$ ]] && [ "$per_host" -ge 1 ] || { echo "cluster.sh: --ranks-per-host $per_host: expected >= 1" >&2; exit 2; }
[ "$mpi_tcp" = tuned ] || [ "$mpi_tcp" = default ] || { echo "cluster.sh: --mpi-tcp $mpi_tcp: expected tuned or default" >&2; exit 2; }
[[ "$timeout_s" =~ ^[0-9]+$ ]] || { echo "cluster.sh: --timeout $timeout_s: expected seconds" >&2; exit 2; }

skip() { echo "cluster.sh: SKIP: $*" >&2; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
command -v mpirun >/dev/null || skip "mpirun is not installed"
[ -z "$link" ] || command -v tc >/dev/null || skip "tc is not installed (needed for --link)"

# Names unique to this run: several runs may share the machine.
tag="s$$"
sw="${tag}sw"
ns_of() { echo "${tag}h$1"; }
addr_of() { echo "10.231.0.$(($1 + 1))"; }
work=$(mktemp -d /tmp/stragglar-cluster.XXXXXX)

cleanup() {
  set +e
  # Whatever this run started inside its hosts (daemons, ranks after a timeout), by pid.
  for ((h = 0; h < hosts; h++)); do
    for pid in $(ip netns pids "$(ns_of "$h")" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  done
  for ((h = 0; h < hosts; h++)); do ip netns del "$(ns_of "$h")" 2>/dev/null; done
  ip netns del "$sw" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$sw" 2>/dev/null || skip "cannot create a network namespace here (ip netns add failed: no CAP_SYS_ADMIN?)"
ip -n "$sw" link add br0 type bridge || skip "cannot create a bridge"
ip -n "$sw" link set br0 up
ip -n "$sw" link set lo up
for ((h = 0; h < hosts; h++)); do
  ns=$(ns_of "$h")
  ip netns add "$ns"
  # The veth pair is made inside the host's namespace (no name clash with other runs), and
  # its far end moved to the switch.
  ip -n "$ns" link add eth0 type veth peer name "p$h"
  ip -n "$ns" link set "p$h" netns "$sw"
  ip -n "$sw" link set "p$h" master br0
  ip -n "$sw" link set "p$h" up
  ip -n "$ns" addr add "$(addr_of "$h")/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  if [ -n "$link" ]; then
    # tbf shapes what the host sends; every host's egress is capped, so every host pair is.
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$link" burst 256kb latency 50ms \
      || skip "tc tbf failed on this kernel"
  fi
done

# A link reports carrier (IFF_RUNNING, operstate "up") up to a second after `link set up` (the
# kernel defers it); UCX's TCP transport leaves out a device that is not running, and would then
# offer a peer on another host only its loopback address. Wait for every host's eth0.
for ((h = 0; h < hosts; h++)); do
  for ((try = 0; ; try++)); do
    state=$(ip netns exec "$(ns_of "$h")" cat /sys/class/net/eth0/operstate)
    [ "$state" != up ] || break
    [ $try -lt 100 ] || { echo "cluster.sh: host $h's eth0 is still '$state' after 10 s" >&2; exit 1; }
    sleep 0.1
  done
done

# The rsh agent: Open MPI calls it as `agent HOST COMMAND...` (HOST: an address from --host)
# and it runs COMMAND in that host's namespace, with its own host name.
cat >"$work/agent.sh" <<EOF
#!/bin/sh
host=\$1; shift
idx=\$(( \${host##*.} - 1 ))
exec ip netns exec ${tag}h\$idx unshare --uts sh -c 'hostname "host\$0"; exec sh -c "\$*"' "\$idx" "\$*"
EOF
chmod +x "$work/agent.sh"

hostlist=""
for ((h = 0; h < hosts; h++)); do hostlist+="${hostlist:+,}$(addr_of "$h"):$per_host"; done
np=$((hosts * per_host))
# What a user would set for Open MPI's TCP on such links, on every run (native included) unless
# --mpi-tcp default. With one connection per peer pair (Open MPI's default) MPI_Sendrecv of
# 16 MiB each way between two hosts takes ~2x what raw TCP needs for the same bytes; two
# connections bring it within ~1.15x. More links gained nothing over two, and 8 stalled one run;
# socket buffer sizes (btl_tcp_sndbuf/rcvbuf 4 MiB) and larger eager/fragment sizes gained
# nothing either (scripts/cluster-floor.sh measures them; figures in docs/benchmarks.md).
tcp_tuning=(--mca btl_tcp_links 2)
# --map-by slot fills each host in turn: ranks are host-major.
mpi_flags=(--oversubscribe --host "$hostlist" -np "$np" --map-by slot
           --mca plm_rsh_agent "$work/agent.sh" --mca plm_rsh_no_tree_spawn 1
           --mca btl self,vader,tcp --mca btl_tcp_if_include 10.231.0.0/24 --mca oob_tcp_if_include 10.231.0.0/24
           -x STRAGGLAR_CLUSTER_HOST0="$(addr_of 0)" -x PATH)
[ "$mpi_tcp" = default ] || mpi_flags+=("${tcp_tuning[@]}")
[ "$(id -u)" -ne 0 ] || mpi_flags+=(--allow-run-as-root)
export STRAGGLAR_CLUSTER_HOST0
STRAGGLAR_CLUSTER_HOST0=$(addr_of 0)
echo "cluster.sh: $hosts hosts x $per_host ranks, link ${link:-unshaped}, host 0 at $STRAGGLAR_CLUSTER_HOST0" >&2
# mpirun runs inside host 0 (its daemon reaches the others over the bridge).
set +e
timeout --kill-after=10 "$timeout_s" ip netns exec "$(ns_of 0)" unshare --uts sh -c 'hostname host0; exec "$@"' sh \
  mpirun "${mpi_flags[@]}" "$@"
rc=$?
set -e
[ $rc -ne 124 ] || echo "cluster.sh: timed out after ${timeout_s} s" >&2
exit $rc
