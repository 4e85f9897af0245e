#!/usr/bin/env bash
# Ranks of one machine that name two hosts: the upper half of the ranks runs in its own UTS
# namespace with another host name (what the runtime's host ids read, hosts.cpp), the lower
# half keeps this one. Memory and clock are still shared, so this tests only what the host
# exchange decides: auto must leave arrival tickets off (docs/arrival-tickets.md).
#   run_two_hostnames.sh NP MPIEXEC "FLAGS" TEST_BINARY ARGS...
# Exit 77 (skipped) where a UTS namespace cannot be made (no CAP_SYS_ADMIN).
set -u
if [ "${STRAGGLAR_TWO_HOSTNAMES_RANK:-}" = 1 ]; then
  # One rank, under mpirun: Open MPI's rank variable says which half it is in.
  r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}} n=${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}
  if [ "$r" -ge $((n / 2)) ]; then
    exec unshare --uts sh -c 'hostname "$(hostname)-second-host" && exec "$@"' sh "$@"
  fi
  exec "$@"
fi
np=$1 mpiexec=$2 flags=$3
shift 3
if ! unshare --uts true 2>/dev/null; then
  echo "run_two_hostnames: cannot make a UTS namespace here (unshare --uts): skipped"; exit 77
fi
# shellcheck disable=SC2086
STRAGGLAR_TWO_HOSTNAMES_RANK=1 exec "$mpiexec" $flags -np "$np" -x STRAGGLAR_TWO_HOSTNAMES_RANK \
  bash "$0" "$@"
