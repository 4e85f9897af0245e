#!/usr/bin/env bash
# The link floor of the testbed, hand-run: raw TCP vs MPI_Sendrecv moving SIZE bytes each way at
# once between two hosts of scripts/cluster.sh (one rank each), under Open MPI's TCP defaults and
# under the testbed's settings (scripts/cluster.sh --mpi-tcp), and any extra candidates given with
# --try "MCA FLAGS". Runs are interleaved (ROUNDS rounds, each one run of every variant with REPS
# repetitions) so that machine load hits all alike; prints each variant's median and range in ms.
#
#   bash scripts/cluster-floor.sh [--link 1gbit] [--size 16777216] [--reps 10] [--rounds 3]
#                                 [--try "--mca btl_tcp_links 2"]...
#
# Root only (network namespaces); exits 77 where scripts/cluster.sh cannot make them.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
link=1gbit size=$((16 << 20)) reps=10 rounds=3
tries=()
while [ $# -gt 0 ]; do
  case "$1" in
    --link) link=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --try) tries+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--link RATE] [--size BYTES] [--reps N] [--rounds N] [--try \"MCA FLAGS\"]..." >&2; exit 2 ;;
  esac
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/stragglar-floor.XXXXXX)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/sendrecv" "$here/bench/cluster/sendrecv.c"
cluster=(bash "$here/scripts/cluster.sh" --hosts 2 --ranks-per-host 1 --link "$link" --timeout 90)

names=("raw TCP" "MPI defaults" "MPI testbed settings")
for t in "${tries[@]}"; do names+=("MPI $t"); done
run_variant() { # index -> repetition times (ms), one a line
  local rc=0
  case "$1" in
    0) "${cluster[@]}" -- sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then role=listen; else role=connect; fi
         exec python3 "$0" $role "$STRAGGLAR_CLUSTER_HOST0" 5599 "$1" "$2"' \
         "$here/bench/cluster/tcp_duplex.py" "$size" "$reps" || rc=$? ;;
    1) "${cluster[@]}" --mpi-tcp default -- "$work/sendrecv" "$size" "$reps" || rc=$? ;;
    2) "${cluster[@]}" -- "$work/sendrecv" "$size" "$reps" || rc=$? ;;
    *) # shellcheck disable=SC2086 # the candidate's flags are words
       "${cluster[@]}" --mpi-tcp default -- ${tries[$(($1 - 3))]} "$work/sendrecv" "$size" "$reps" || rc=$? ;;
  esac
  [ $rc -ne 77 ] || { cat "$work/log" >&2; exit 77; }
  [ $rc -eq 0 ] || echo "cluster-floor: variant '${names[$1]}' failed (exit $rc)" >&2
  return $rc
}
echo "cluster-floor: $size bytes each way, link $link, $rounds rounds x $reps reps; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
  for ((v = 0; v < ${#names[@]}; v++)); do
    # A run that fails or stalls (killed after 90 s) is counted and left out of the figures.
    run_variant "$v" 2>"$work/log" >>"$work/v$v" || echo "${names[$v]}" >>"$work/failed"
  done
done
echo "cluster-floor: load after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-48s %8s %8s %8s %6s  (ms, %d repetitions each)\n' variant median min max failed "$((rounds * reps))"
for ((v = 0; v < ${#names[@]}; v++)); do
  failed=$(grep -cxF -- "${names[$v]}" "$work/failed" 2>/dev/null || true)
  sort -n "$work/v$v" | awk -v name="${names[$v]}" -v failed="${failed:-0}" '{ a[NR] = $1 } END {
    m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "%-48s %8.1f %8.1f %8.1f %6d\n", name, m, a[1], a[NR], failed }'
done
