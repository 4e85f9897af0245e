#!/usr/bin/env bash
# A stopped (SIGSTOP) or killed (SIGKILL) peer must end in an error, never a hang.
#   run_dead_peer.sh stop|stop_auto|kill NP MPIEXEC "FLAGS" TEST_BINARY
# stop (stop_auto: after three calls of auto's policy, test_mpi_allreduce.cpp): every surviving rank must report Timeout (STRAGGLAR_TIMEOUT_S=5), with a message that
#       does not claim the peer died (it may be late), or the "gave up" notice of a survivor
#       that timed out (at least one does), and the whole run
#       must end within 60 s. kill: mpirun must end (non-zero) within 60 s.
set -u
mode=$1 np=$2 mpiexec=$3 flags=$4 bin=$5
victim=$((np - 1))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
start=$(date +%s)
# shellcheck disable=SC2086
STRAGGLAR_TIMEOUT_S=5 timeout -s KILL 90 "$mpiexec" $flags -np "$np" \
  -x STRAGGLAR_TIMEOUT_S "$bin" "$mode" "$victim" "$dir"
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "mpirun exit status $rc after ${elapsed} s"
if [ "$rc" -eq 137 ] && [ "$elapsed" -ge 85 ]; then
  echo "FAIL: the run hung (killed by the outer timeout)"; exit 1
fi
if [ "$elapsed" -gt 60 ]; then echo "FAIL: took ${elapsed} s, expected < 60 s"; exit 1; fi
if [ "$mode" = kill ]; then
  # mpirun tears the job down when a rank dies; survivors that got further report Timeout.
  if [ "$rc" -eq 0 ]; then echo "FAIL: mpirun reported success with a killed rank"; exit 1; fi
  for f in "$dir"/rank*.txt; do
    [ -e "$f" ] || continue
    grep -qE '^(Timeout|GaveUp)' "$f" || { echo "FAIL: $f: $(cat "$f")"; exit 1; }
  done
  echo "PASS"; exit 0
fi
fails=0 timeouts=0
for ((r = 0; r < np; r++)); do
  [ "$r" -eq "$victim" ] && continue
  f="$dir/rank$r.txt"
  if [ ! -e "$f" ]; then echo "FAIL: rank $r reported nothing"; fails=1; continue; fi
  # The message says what is known: the peer may only be late, not dead.
  if grep -q '^Timeout' "$f" && grep -q 'later than the timeout, stopped, died, or called with different arguments' "$f"; then
    echo "rank $r: $(cat "$f")"; timeouts=$((timeouts + 1))
  elif grep -q '^GaveUp' "$f" && grep -q 'gave up on this call' "$f"; then
    echo "rank $r: $(cat "$f")"  # a peer that timed out told it
  else
    echo "FAIL: rank $r: $(cat "$f")"; fails=1
  fi
done
if [ "$timeouts" -eq 0 ]; then echo "FAIL: no survivor timed out (one waits for the stopped rank)"; fails=1; fi
[ "$fails" -eq 0 ] && echo "PASS"
exit "$fails"
