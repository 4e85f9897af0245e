#!/usr/bin/env bash
# STRAGGLAR_DEBUG=INFO prints the configuration once per process, however many
# communicators the process uses: run the tiny_timeout mode (two communicators) on NP ranks and
# count the "stragglar INFO [pid" lines.
#   run_debug_once.sh NP MPIEXEC "FLAGS" TEST_BINARY
set -u
np=$1 mpiexec=$2 flags=$3 bin=$4
# shellcheck disable=SC2086
out=$(STRAGGLAR_DEBUG=INFO "$mpiexec" $flags -np "$np" -x STRAGGLAR_DEBUG "$bin" correctness quick 2>&1)
rc=$?
lines=$(grep -c 'stragglar INFO \[pid' <<<"$out")
echo "mpirun exit status $rc; $lines configuration lines for $np processes"
[ "$rc" -eq 0 ] || { echo "FAIL: the run failed"; tail -20 <<<"$out"; exit 1; }
[ "$lines" -eq "$np" ] || { echo "FAIL: expected exactly one configuration line per process"; grep 'stragglar INFO \[pid' <<<"$out"; exit 1; }
echo PASS
