#!/usr/bin/env bash
# The PyTorch job of tests/torch/cluster_job.py across the namespace testbed (scripts/cluster.sh),
# HOSTS x RANKS ranks, 1 Gbit/s links: the "stragglar" backend over UCX (TCP only: shared memory
# would cross the "hosts", which share one machine) and Gloo, both over eth0 (loopback addresses
# would lead a peer on another host back to its own). Exit 77 where namespaces cannot be made.
#
#   run_across_cluster.sh PYTHON HOSTS RANKS
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -eq 3 ] || { echo "usage: $0 PYTHON HOSTS RANKS" >&2; exit 2; }
export UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 STRAGGLAR_TIMEOUT_S=60
exec bash "$here/scripts/cluster.sh" --hosts "$2" --ranks-per-host "$3" --link 1gbit --timeout 240 -- \
  -x UCX_TLS -x UCX_NET_DEVICES -x GLOO_SOCKET_IFNAME -x OMP_NUM_THREADS -x STRAGGLAR_TIMEOUT_S -x PYTHONPATH \
  "$1" "$here/tests/torch/cluster_job.py"
