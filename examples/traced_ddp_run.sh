#!/usr/bin/env bash
# A traced DDP run (docs/trace.md): examples/ddp_straggler.py (DDP training, the last rank late
# every step) on the stragglar process group with STRAGGLAR_TRACE, then the report. Twice:
# observe-only (STRAGGLAR_ALGORITHM=native: the backend's native AllReduce runs, the trace records
# who was late) and with stragglar on (auto).
#
#   bash examples/traced_ddp_run.sh [OUT_DIR] [NPROC]   (needs the PyTorch backend built:
#                                                       PYTHONPATH=build/python, docs/torch.md)
#
# Writes OUT_DIR/{observe,auto}/ (per-rank trace files) and OUT_DIR/{observe,auto}.{html,png}.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/trace-ddp-example}
nproc=${2:-4}
export PYTHONPATH=${STRAGGLAR_PYTHONPATH:-$here/build/python}${PYTHONPATH:+:$PYTHONPATH} MPLBACKEND=Agg

for mode in observe auto; do
  rm -rf "${out:?}/$mode"
  mkdir -p "$out/$mode"
  algorithm=$([ "$mode" = observe ] && echo native || echo auto)
  echo "== $mode: STRAGGLAR_ALGORITHM=$algorithm STRAGGLAR_TRACE=$out/$mode/"
  STRAGGLAR_TRACE="$out/$mode/" STRAGGLAR_ALGORITHM="$algorithm" \
    python3 "$here/examples/ddp_straggler.py" --nproc "$nproc" --modes stragglar --steps 12 --warmup 2 \
    --delay-ms 60 --width 512 --depth 4 --bucket-mb 4
  python3 -m stragglar.report "$out/$mode" -o "$out/$mode.html"
  python3 -m stragglar.report "$out/$mode" -o "$out/$mode.png" > /dev/null
done
echo "reports: $out/observe.html $out/auto.html"
