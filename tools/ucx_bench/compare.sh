#!/usr/bin/env bash
# The measurement behind docs/ucx.md (which engine carries the torch backend's CPU
# tensors): 8 ranks, 64 MiB float32 sum, rank 7 sleeping 300 ms after a common start, exposed
# time (latest exit - straggler's entry, median of 10). Every engine runs in the same sitting,
# the whole set REPS times over, interleaved, so a change of machine load shows as a spread.
# UCX and MPI rows are the one bench runner (tools/bench/bench_runner.hpp) under mpirun: the same
# inputs, checks, timing and JSON; only the data path differs.
#
#   tools/ucx_bench/compare.sh [BUILD_DIR=./build-ucx] [OUT_DIR=ucx-compare]   (REPS=2)
#   ONLY="ucx-shm-backoff mpi-shm" tools/ucx_bench/compare.sh ...   (just those rows)
#
# Needs: BUILD_DIR with stragglar-ucx-bench, stragglar-bench (MPI) and the stragglar CLI;
# python3 with torch for the Gloo rows (skipped with a message without it).
# Rows: ucx-shm-poll ucx-shm-backoff ucx-shm-yieldpoll ucx-tcp-peer mpi-shm mpi-tcp gloo.
set -uo pipefail
build=${1:-./build-ucx}
out=${2:-ucx-compare}
reps=${REPS:-2}
only=${ONLY:-}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
common=(-b 64M -e 64M -d float -n 10 -w 2 --straggler 7 --delay 300)
algos=stragglar,stragglar:1,ring,rhd

run() {  # row, rep, command... (the command's --json goes to OUT/ROW-REP.json)
  local row=$1 rep=$2
  shift 2
  if [ -n "$only" ] && [[ " $only " != *" $row "* ]]; then return; fi
  echo "### $row-$rep (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$@" --json "$out/$row-$rep.json" 2>&1 | grep --line-buffered -v ' UCX  WARN ' | tee "$out/$row-$rep.txt"
}

ucx=("$build/stragglar-ucx-bench" "${common[@]}" --algo "$algos")
mpi=("$build/stragglar-bench" "${common[@]}" --algo "$algos,native")
for rep in $(seq "$reps"); do
  # UCX picks shared memory (sysv + cma) within a host; STRAGGLAR_UCX_WAIT: how a rank waits.
  run ucx-shm-poll "$rep" mpirun -np 8 -x STRAGGLAR_UCX_WAIT=poll "${ucx[@]}"
  run ucx-shm-backoff "$rep" mpirun -np 8 -x STRAGGLAR_UCX_WAIT=backoff "${ucx[@]}"
  run ucx-shm-yieldpoll "$rep" mpirun -np 8 -x STRAGGLAR_UCX_WAIT=yield_poll "${ucx[@]}"
  # Across hosts UCX uses PEER error handling over the network (here: TCP loopback).
  run ucx-tcp-peer "$rep" mpirun -np 8 -x UCX_TLS=tcp,self -x STRAGGLAR_UCX_ERROR_MODE=peer "${ucx[@]}"
  run mpi-shm "$rep" mpirun -np 8 "${mpi[@]}"
  run mpi-tcp "$rep" mpirun -np 8 --mca btl tcp,self "${mpi[@]}"
  if python3 -c 'import torch' 2>/dev/null; then
    run gloo "$rep" python3 "$here/gloo_bench.py" --np 8 --bytes 64M --iters 10 --warmup 2 --delay 300 \
      --modes allreduce,schedule:stragglar:1,schedule:ring --stragglar "$build/stragglar"
  elif [ -z "$only" ] || [[ " $only " == *" gloo "* ]]; then
    echo "### gloo-$rep: skipped (python3 cannot import torch; python3 -m pip install torch)"
  fi
done
