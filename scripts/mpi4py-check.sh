#!/usr/bin/env bash
# mpi4py's own test suite through the preload library (issue #21 item 4; docs/preload.md):
#   bash scripts/mpi4py-check.sh openmpi|mpich BUILD_DIR [TESTS_REGEX] [NPROCS...]
# Builds the PyPI sdist of mpi4py against that MPI into BUILD_DIR/mpi4py (pip --target, no
# cache of ours), then runs its tests matching TESTS_REGEX (default test_cco_buf: the buffer
# collectives, where MPI_Allreduce is) at each process count (default 1 2 3 5) twice: plain, and
# through BUILD_DIR/stragglar-run with STRAGGLAR_PMPI_MIN_BYTES=0 (everything that can go
# through stragglar does). The two runs must end alike: same tests run, same result line on
# every rank. Prints the counts and how many calls went through stragglar; exit 1 on a difference.
set -euo pipefail
flavor=${1:?usage: mpi4py-check.sh openmpi|mpich BUILD_DIR [TESTS_REGEX] [NPROCS...]}
build=$(readlink -f "${2:?BUILD_DIR}")
tests=${3:-test_cco_buf}
shift 3 2>/dev/null || shift $#
nprocs=("$@")
[[ ${#nprocs[@]} -gt 0 ]] || nprocs=(1 2 3 5)
version=4.1.2
case $flavor in
  openmpi) mpicc=mpicc.openmpi; mpiexec=(mpiexec.openmpi --allow-run-as-root --oversubscribe) ;;
  mpich) mpicc=mpicc.mpich; mpiexec=(mpiexec.mpich) ;;
  *) echo "mpi4py-check.sh: MPI '$flavor' is not valid: expected openmpi or mpich" >&2; exit 2 ;;
esac
[[ -x $build/stragglar-run && -f $build/libstragglar_pmpi_$flavor.so ]] ||
  { echo "mpi4py-check.sh: $build has no stragglar-run + libstragglar_pmpi_$flavor.so (build target stragglar_pmpi)" >&2; exit 2; }

work=$build/mpi4py
if ! ls "$work"/site/mpi4py/MPI*.so >/dev/null 2>&1; then  # built once per build directory
  rm -rf "$work" && mkdir -p "$work"
  python3 -m pip download --quiet --no-binary :all: --no-deps "mpi4py==$version" -d "$work"
  tar xzf "$work/mpi4py-$version.tar.gz" -C "$work"
  start=$(date +%s)
  # -O1 -g0: a test build; -O3 -g made MPICH's MPI.c take over 20 min on the loaded 2-core VM
  CFLAGS="-O1 -g0" MPICC=$mpicc python3 -m pip install --quiet --no-binary mpi4py --no-deps --target "$work/site" \
    "$work/mpi4py-$version.tar.gz" 2>&1 | grep -v "Running pip as the 'root' user" || true
  echo "mpi4py $version built against $flavor in $(( $(date +%s) - start )) s"
fi
suite=$work/mpi4py-$version/test

# Each rank writes its own log (ranks' lines would interleave in one); the summary is every
# rank's "Ran N tests" and result line, sorted and counted.
run() {  # run LOGPREFIX [ENV=VALUE...] -- launcher prefix...
  local prefix=$1; shift
  rm -f "$prefix".*
  "${mpiexec[@]}" -n "$n" "$@" sh -c 'exec "$0" "$@" > "'"$prefix"'.${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" 2>&1' \
    python3 "$suite/runtests.py" --path "$work/site" -i "$tests" || true
}
summary() { cat "$1".* | grep -E '^(Ran [0-9]+ tests|OK|FAILED)' | sed -E 's/ in [0-9.]+s//' | sort | uniq -c | tr -s ' ' | paste -sd';' -; }

status=0
for n in "${nprocs[@]}"; do
  plain=$work/plain-n$n.log preloaded=$work/preload-n$n.log
  timeout 900 bash -c "$(declare -f run); $(declare -p mpiexec suite work tests n); run '$plain'" >"$plain.launcher" 2>&1 || true
  STRAGGLAR_PMPI_MIN_BYTES=0 STRAGGLAR_DEBUG=INFO timeout 900 \
    bash -c "$(declare -f run); $(declare -p mpiexec suite work tests n); run '$preloaded' '$build/stragglar-run'" \
    >"$preloaded.launcher" 2>&1 || true
  a=$(summary "$plain") b=$(summary "$preloaded")
  served=$(cat "$preloaded".* | grep -o 'rank 0: [0-9]* MPI_Allreduce calls went through stragglar, [0-9]* passed through' || echo "no count")
  echo "mpi4py $flavor $tests n=$n: without preload [$a] | with preload, min bytes 0 [$b] ($served)"
  if [[ -z $a || $a != "$b" ]]; then
    echo "mpi4py-check.sh: results differ (logs: $plain.*, $preloaded.*)" >&2
    status=1
  fi
done
exit $status
