#!/usr/bin/env bash
# The measurement behind docs/ucx.md (issue #11: which engine carries the torch backend's CPU
# tensors): 8 ranks, 64 MiB float32 sum, rank 7 sleeping 300 ms after a common start, exposed
# time (latest exit - straggler's entry, median of 10). Every engine runs in the same sitting,
# the whole set REPS times over, interleaved, so a change of machine load shows as a spread.
#
#   tools/ucx_bench/compare.sh [BUILD_DIR=./build-ucx] [OUT_DIR=ucx-compare]   (REPS=2)
#
# Needs: BUILD_DIR with stragglar-ucx-bench, stragglar-bench (MPI) and the stragglar CLI;
# python3 with torch for the Gloo rows (skipped with a message without it).
set -uo pipefail
build=${1:-./build-ucx}
out=${2:-ucx-compare}
reps=${REPS:-2}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
common=(-b 64M -e 64M -d float -n 10 -w 2 --straggler 7 --delay 300)
algos=stragglar,stragglar:1,ring,rhd

run() {  # name, command...
  local name=$1
  shift
  echo "### $name (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$@" 2>&1 | grep --line-buffered -v ' UCX  WARN ' | tee "$out/$name.txt"
}

for rep in $(seq "$reps"); do
  run "ucx-shm-poll-$rep" env STRAGGLAR_UCX_WAIT=poll "$build/stragglar-ucx-bench" --np 8 "${common[@]}" \
    --algo "$algos" --json "$out/ucx-shm-poll-$rep.json"
  run "ucx-shm-backoff-$rep" env STRAGGLAR_UCX_WAIT=backoff "$build/stragglar-ucx-bench" --np 8 "${common[@]}" \
    --algo "$algos" --json "$out/ucx-shm-backoff-$rep.json"
  run "ucx-shm-yieldpoll-$rep" env STRAGGLAR_UCX_WAIT=yield_poll "$build/stragglar-ucx-bench" --np 8 "${common[@]}" \
    --algo "$algos" --json "$out/ucx-shm-yieldpoll-$rep.json"
  # Across hosts UCX uses PEER error handling over the network (here: TCP loopback).
  run "ucx-tcp-peer-$rep" env UCX_TLS=tcp,self STRAGGLAR_UCX_ERROR_MODE=peer "$build/stragglar-ucx-bench" --np 8 \
    "${common[@]}" --algo "$algos" --json "$out/ucx-tcp-peer-$rep.json"
  run "mpi-shm-$rep" mpirun -np 8 "$build/stragglar-bench" "${common[@]}" --algo "$algos,native" \
    --json "$out/mpi-shm-$rep.json"
  run "mpi-tcp-$rep" mpirun -np 8 --mca btl tcp,self "$build/stragglar-bench" "${common[@]}" \
    --algo "$algos,native" --json "$out/mpi-tcp-$rep.json"
  if python3 -c 'import torch' 2>/dev/null; then
    run "gloo-$rep" python3 "$here/gloo_bench.py" --np 8 --bytes 64M --iters 10 --warmup 2 --delay 300 \
      --modes allreduce,schedule:stragglar:1,schedule:ring --stragglar "$build/stragglar" \
      --json "$out/gloo-$rep.json"
  else
    echo "### gloo-$rep: skipped (python3 cannot import torch; python3 -m pip install torch)"
  fi
done
