#!/usr/bin/env bash
# A STRAGGLAR_TRACE that cannot be written: the job runs (exact results, exit 0) and each process
# prints one error naming the path (call_trace.cpp), not one per call or per communicator.
#   run_trace_unwritable.sh N MPIEXEC "FLAGS" TEST_BINARY
set -u
n=$1 mpiexec=$2 flags=$3 binary=$4
bad=/nonexistent-stragglar-dir/job
err=$(mktemp)
trap 'rm -f "$err"' EXIT
# shellcheck disable=SC2086
STRAGGLAR_TRACE=$bad "$mpiexec" $flags -np "$n" "$binary" unwritable "$bad" 2>"$err"
rc=$?
cat "$err" >&2
[ "$rc" -eq 0 ] || { echo "FAIL: the job exited $rc with an unwritable STRAGGLAR_TRACE"; exit 1; }
lines=$(grep -c "STRAGGLAR_TRACE='$bad': cannot write" "$err")
if [ "$lines" -lt 1 ] || [ "$lines" -gt "$n" ]; then
  echo "FAIL: $lines error lines naming $bad, expected one per process (1 to $n)"
  exit 1
fi
echo "OK: $lines error line(s) naming $bad for $n processes; the job ran"
