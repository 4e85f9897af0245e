#!/usr/bin/env bash
# A traced MPI run (docs/trace.md): an unmodified MPI program (delayed_allreduce.c: a loop of
# MPI_Allreduce with one rank late) through the preload with STRAGGLAR_TRACE, then the report.
# Twice: observe-only (STRAGGLAR_ALGORITHM=native: MPI's own AllReduce runs, the trace records
# who was late and the report estimates what StragglAR would save) and with stragglar on (auto).
#
#   bash examples/traced_mpi_run.sh [OUT_DIR] [NP]      (after building: see README.md)
#
# Writes OUT_DIR/{observe,auto}/ (per-rank trace files), OUT_DIR/{observe,auto}.html and .png,
# and OUT_DIR/{observe,auto}.chrome.json (one Chrome trace of every rank: open it in
# https://ui.perfetto.dev or chrome://tracing).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/trace-example}
np=${2:-8}
build=${STRAGGLAR_BUILD:-$here/build}
program=(--mib 16 --delay-ms 40 --late-rank $((np - 1)) --iters 20 --warmup 5)
export PYTHONPATH=$here/python${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg

for mode in observe auto; do
  rm -rf "${out:?}/$mode"
  mkdir -p "$out/$mode"
  algorithm=$([ "$mode" = observe ] && echo native || echo auto)
  echo "== $mode: STRAGGLAR_ALGORITHM=$algorithm STRAGGLAR_TRACE=$out/$mode/"
  STRAGGLAR_TRACE="$out/$mode/" STRAGGLAR_ALGORITHM="$algorithm" \
    mpirun -np "$np" "$build/stragglar-run" "$build/delayed_allreduce" "${program[@]}"
  python3 -m stragglar.report "$out/$mode" -o "$out/$mode.html" --chrome "$out/$mode.chrome.json"
  python3 -m stragglar.report "$out/$mode" -o "$out/$mode.png" > /dev/null
done
echo "reports: $out/observe.html $out/auto.html"
