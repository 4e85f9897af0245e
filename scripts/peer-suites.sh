#!/usr/bin/env bash
# Peer MPI test suites through the preload library, by hand (issue #21 item 4; docs/preload.md
# "Peer test suites by hand: OSU and IMB"). Not in CI: neither suite is on a package registry.
#   bash scripts/peer-suites.sh openmpi|mpich BUILD_DIR IMB_SRC OSU_SRC [NPROCS...]
# IMB_SRC: a tree of github.com/intel/mpi-benchmarks; OSU_SRC: an OSU micro-benchmarks 7.x
# tree (the release tarball's layout, with its generated ./configure). Neither is modified:
# each is copied into BUILD_DIR/peer-suites/FLAVOR/ and built there against that MPI —
# IMB-MPI1 with -DCHECK (IMB's result checking: the "defects" column and "Error Allreduce"
# lines), OSU's osu_allreduce (whose -c validates every result).
# Then, at each process count (default 2 3 5 8), every case below runs twice: plain, and
# through BUILD_DIR/stragglar-run with STRAGGLAR_PMPI_MIN_BYTES=0 (everything that can go
# through stragglar does) and STRAGGLAR_DEBUG=INFO (to count the calls served). The two runs
# must end alike: same exit status, same per-size validation (OSU) / defects and error lines
# (IMB). Prints one table row per case; exit 1 on a difference. Logs: BUILD_DIR/peer-suites/.
# Environment: OSU_ITERS (default 20), IMB_ITERS (20), IMB_MSGLOG (0:20), RUN_TIMEOUT_S (900),
# CASES (an extended regex: only the cases whose "suite, case" matches, e.g. 'mpi_int$|float');
# STRAGGLAR_* variables reach the preloaded runs (e.g. STRAGGLAR_ALGORITHM=ring instead of auto).
set -euo pipefail
usage="usage: peer-suites.sh openmpi|mpich BUILD_DIR IMB_SRC OSU_SRC [NPROCS...]"
flavor=${1:?$usage}
build=$(readlink -f "${2:?$usage}")
imb_src=$(readlink -f "${3:?$usage}")
osu_src=$(readlink -f "${4:?$usage}")
shift 4
nprocs=("$@")
[[ ${#nprocs[@]} -gt 0 ]] || nprocs=(2 3 5 8)
osu_iters=${OSU_ITERS:-20} imb_iters=${IMB_ITERS:-20} imb_msglog=${IMB_MSGLOG:-0:20}
run_timeout=${RUN_TIMEOUT_S:-900} cases=${CASES:-.}
case $flavor in
  openmpi) cc=mpicc.openmpi cxx=mpicxx.openmpi mpiexec=(mpiexec.openmpi --allow-run-as-root --oversubscribe) ;;
  mpich) cc=mpicc.mpich cxx=mpicxx.mpich mpiexec=(mpiexec.mpich) ;;
  *) echo "peer-suites.sh: MPI '$flavor' is not valid: expected openmpi or mpich" >&2; exit 2 ;;
esac
[[ -x $build/stragglar-run && -f $build/libstragglar_pmpi_$flavor.so ]] ||
  { echo "peer-suites.sh: $build has no stragglar-run + libstragglar_pmpi_$flavor.so (build target stragglar_pmpi)" >&2; exit 2; }
[[ -f $imb_src/src_cpp/Makefile ]] || { echo "peer-suites.sh: $imb_src is not an IMB tree (no src_cpp/Makefile)" >&2; exit 2; }
[[ -x $osu_src/configure && -f $osu_src/c/mpi/collective/blocking/osu_allreduce.c ]] ||
  { echo "peer-suites.sh: $osu_src is not an OSU micro-benchmarks tree with ./configure" >&2; exit 2; }

work=$build/peer-suites/$flavor
logs=$work/logs
mkdir -p "$logs"

# ---- build (once per BUILD_DIR and MPI) -----------------------------------------------------
imb=$work/imb/src_cpp/IMB-MPI1
if [[ ! -x $imb ]]; then
  rm -rf "$work/imb" && cp -r "$imb_src" "$work/imb"
  # -DCHECK: IMB's checking build. *_SKIP_MPICXX: Open MPI's C++ binding headers fail IMB's
  # -Werror (cast-function-type) with GCC 12.
  make -C "$work/imb/src_cpp" -f Makefile TARGET=MPI1 CC="$cc" CXX="$cxx" \
    CPPFLAGS="-DCHECK -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX" >"$logs/build-imb.log" 2>&1 ||
    { echo "peer-suites.sh: IMB-MPI1 did not build (see $logs/build-imb.log)" >&2; exit 1; }
fi
osu=$work/osu/c/mpi/collective/blocking/osu_allreduce
if [[ ! -x $osu ]]; then
  rm -rf "$work/osu" && cp -r "$osu_src" "$work/osu"
  (cd "$work/osu" && ./configure CC="$cc" CXX="$cxx" && make -C c/mpi/collective/blocking osu_allreduce) \
    >"$logs/build-osu.log" 2>&1 ||
    { echo "peer-suites.sh: osu_allreduce did not build (see $logs/build-osu.log)" >&2; exit 1; }
fi

# ---- run -------------------------------------------------------------------------------------
# launch LOG N [stragglar-run] PROGRAM ARGS...: the whole job's stdout+stderr in LOG; its exit
# status in LOG.rc.
launch() {
  local log=$1 n=$2; shift 2
  local rc=0
  timeout "$run_timeout" "${mpiexec[@]}" -n "$n" "$@" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$log.rc"
}
# What must be equal between the two runs, as text.
# shellcheck disable=SC2317  # called as ${suite}_result / ${suite}_summary
osu_result() {  # the datatype headers and "SIZE Pass|Fail" per row, in order; the exit status
  grep -E '^# Datatype|^[0-9]+ +[0-9.]+ +(Pass|Fail)' "$1" | awk '/^#/ {print; next} {print $1, $NF}'
  echo "exit $(cat "$1.rc")"
}
# Rows and error lines are found anywhere in a line, the error lines without their "RANK: "
# prefix: ranks' output interleaves, and a rank number can run into another rank's half-printed
# line (Open MPI forwards each rank's output in pieces).
# shellcheck disable=SC2317  # called as ${suite}_result / ${suite}_summary
imb_result() {  # "BYTES DEFECTS" per row; the "Error Allreduce" lines (sorted); the exit status
  sed -n '/Benchmarking Allreduce/,$p' "$1" | grep -oE '[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ *$' |
    awk '{print $1, $6}' || true
  grep -o 'Error Allreduce,size = [0-9]*,sample #[0-9]*' "$1" | sort || true
  echo "exit $(cat "$1.rc")"
}
# shellcheck disable=SC2317  # called as ${suite}_result / ${suite}_summary
osu_summary() {  # "19 pass, 0 fail, exit 0"
  local p f
  p=$(grep -cE '^[0-9]+ +[0-9.]+ +Pass' "$1" || true) f=$(grep -cE '^[0-9]+ +[0-9.]+ +Fail' "$1" || true)
  echo "$p pass, $f fail, exit $(cat "$1.rc")"
}
# shellcheck disable=SC2317  # called as ${suite}_result / ${suite}_summary
imb_summary() {  # "21 sizes, max defects 0.00, 0 error lines, exit 0"
  local rows maxd errs
  rows=$(imb_result "$1" | grep -cE '^[0-9]+ [0-9.]+$' || true)
  maxd=$(imb_result "$1" | awk '/^[0-9]+ [0-9.]+$/ {if ($2 > m) m = $2} END {printf "%.2f", m}')
  errs=$(grep -c 'Error Allreduce' "$1" || true)
  echo "$rows sizes, max defects $maxd, $errs error lines, exit $(cat "$1.rc")"
}
counts() {  # rank 0's "N served / M passed" from the preload's line at MPI_Finalize
  sed -nE 's/.*rank 0: ([0-9]+) MPI_Allreduce calls went through stragglar, ([0-9]+) passed through.*/\1 \/ \2/p' "$1" |
    tail -1 | grep . || echo "no count"
}

status=0
algo=${STRAGGLAR_ALGORITHM:-auto}
printf '| MPI | n | suite, case | without the preload | with it (min bytes 0, %s) | served / passed (rank 0) | same |\n' "$algo"
printf '|---|---|---|---|---|---|---|\n'
compare() {  # compare SUITE NAME N PROGRAM ARGS...
  local suite=$1 name=$2 n=$3; shift 3
  local tag plain pre a b same=yes
  grep -qE -- "$cases" <<<"$suite $name" || return 0
  tag=$(echo "$suite-$name-n$n-$algo" | tr -c 'A-Za-z0-9_.\n-' '_')
  plain=$logs/$tag.plain.log pre=$logs/$tag.preload.log
  launch "$plain" "$n" "$@"
  STRAGGLAR_PMPI_MIN_BYTES=0 STRAGGLAR_DEBUG=INFO launch "$pre" "$n" "$build/stragglar-run" "$@"
  a=$("${suite}_result" "$plain") b=$("${suite}_result" "$pre")
  if [[ $a != "$b" ]] || ! grep -q "communicator 'MPI_COMM_WORLD' ($n ranks)" "$pre"; then
    same="**NO**" status=1
    echo "peer-suites.sh: $suite $name n=$n differs (logs: $plain, $pre)" >&2
  fi
  printf '| %s | %s | %s %s | %s | %s | %s | %s |\n' "$flavor" "$n" "$suite" "$name" \
    "$("${suite}_summary" "$plain")" "$("${suite}_summary" "$pre")" "$(counts "$pre")" "$same"
}

for n in "${nprocs[@]}"; do
  # OSU: -c validates every iteration's result. One datatype per run: osu_allreduce 7.4 never
  # resets its error count, so after one failing size every later one reads Fail (-T all would
  # hide the int and float rows behind MPI_CHAR's, which fails from 16 B on with or without
  # stragglar: its expected sums overflow a char).
  for type in mpi_char mpi_int mpi_float; do
    compare osu "-c -T $type" "$n" "$osu" -c -T "$type" -i "$osu_iters" -x 5
    compare osu "-c -T $type -l" "$n" "$osu" -c -T "$type" -l -i "$osu_iters" -x 5
  done
  # IMB: checking is only meaningful for float (IMB fills and checks every buffer as float);
  # base_vec reduces a derived vector datatype (passes through the preload).
  for variant in "" "-contig_type base_vec" "-red_data_type double" "-red_data_type int"; do
    # shellcheck disable=SC2086
    compare imb "Allreduce ${variant:--red_data_type float}" "$n" "$imb" Allreduce -npmin "$n" \
      -msglog "$imb_msglog" -iter "$imb_iters" $variant
  done
done
exit $status
