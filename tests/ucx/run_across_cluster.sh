#!/usr/bin/env bash
# test_ucx_allreduce across the namespace testbed (scripts/cluster.sh): HOSTS x RANKS ranks,
# started by the testbed's mpirun but connected only through UCX over TCP (RANK / WORLD_SIZE
# from Open MPI's environment, a DirectoryStore on the file system every "host" shares).
# Every algorithm exact, identical on every rank, with messages between hosts over eth0.
#
#   run_across_cluster.sh TEST_BINARY HOSTS RANKS MODE...     (exit 77: no namespaces here)
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 4 ] || { echo "usage: $0 TEST_BINARY HOSTS RANKS MODE..." >&2; exit 2; }
bin=$1 hosts=$2 ranks=$3
shift 3
store=$(mktemp -d /tmp/stragglar-ucx-cluster.XXXXXX)
trap 'rm -rf "$store"' EXIT
# tcp only: shared memory would cross the "hosts" (they share one machine); eth0 is the only
# device that reaches other hosts (loopback addresses would lead a peer back to itself).
export UCX_TLS=tcp,self STRAGGLAR_STORE_DIR="$store" STRAGGLAR_TIMEOUT_S=60
bash "$here/scripts/cluster.sh" --hosts "$hosts" --ranks-per-host "$ranks" --link 1gbit --timeout 240 -- \
  -x UCX_TLS -x STRAGGLAR_STORE_DIR -x STRAGGLAR_TIMEOUT_S \
  sh -c 'RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE exec "$@"' sh "$bin" "$@"
