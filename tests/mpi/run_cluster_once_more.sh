#!/usr/bin/env bash
# Runs scripts/cluster.sh with the given arguments; if it fails (not a skip, 77), runs it once more.
# Why: mpi_cluster_2x4 failed 2 of 4 runs on 2026-11-27 (a StragglAR / stragglar-k round over
# Open MPI's TCP transport between two namespace "hosts" stalled 60 s, STRAGGLAR_TIMEOUT_S, with
# ranks on both sides waiting for each other's messages; alone, the same test passed at once).
# Not understood yet (docs/reliability.md "Open questions"); the retry keeps it a test of
# exactness across hosts, and its first failure stays in the log. Two failures in a row fail.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
bash "$here/scripts/cluster.sh" "$@"
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; then exit "$rc"; fi
echo "run_cluster_once_more: the first attempt failed (exit $rc); running it once more" >&2
bash "$here/scripts/cluster.sh" "$@"
