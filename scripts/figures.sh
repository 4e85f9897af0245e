#!/usr/bin/env bash
# Regenerate every figure of docs/benchmarks.md "Figures" (issue #13) as PNG, headless, from
# the JSON that `stragglar simulate --format json` and `stragglar-bench --json` write. The JSON
# each figure was drawn from is kept in OUT/data/ (redraw one without re-running:
# python3 -m stragglar.figures ... --from-data OUT/data/NAME.json).
#
#   bash scripts/figures.sh [options] [OUT]        OUT: default docs/figures
#
#   --bin DIR        where stragglar and stragglar-bench are (default ./build)
#   --model-only     measure nothing (quick): figures 1 and 4 are made anew; 2 and 3 are redrawn
#                    from the measured JSON already in OUT/data, if any (figure 2 without it is the
#                    model alone, for the paper's Fig. 8c setup; figure 3 is skipped)
#   --np N           ranks of the measured runs (8)
#   --size S         buffer size of the measured runs (64M)
#   --delays LIST    straggler delays of the sweep, ms, comma-separated (0,5,20,60,300)
#   --iters N        timed iterations per sweep point (5)
#   --main-iters N   timed iterations of the main job (10, as scripts/run.sh)
#   --main-job FILE  take the main job's JSON from FILE (e.g. build/main-job.json from
#                    scripts/run.sh) instead of running it
#   --nranks LIST    n of the scaling figure (default 4,8,...,1024)
#
# Figures: 1 scaling.png, 2 delay-sweep.png, 3 measured-vs-model.png,
#          4 schedule-stragglar-n8.png and schedule-stragglar-n32.png.
# The measured ones are timings: take them on a quiet machine (nothing else running).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

bin=./build out=docs/figures model_only=0 np=8 size=64M delays=0,5,20,60,300 iters=5 main_iters=10
main_job="" nranks=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --model-only) model_only=1; shift ;;
    --np) np=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --delays) delays=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --main-iters) main_iters=$2; shift 2 ;;
    --main-job) main_job=$2; shift 2 ;;
    --nranks) nranks=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "figures.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done

cli=$bin/stragglar bench=$bin/stragglar-bench
if [ ! -x "$cli" ]; then
  echo "figures.sh: '$cli' not found: build it (cmake --build build --target stragglar_cli stragglar_bench) or pass --bin DIR" >&2
  exit 2
fi
bash "$repo/scripts/install-python-deps.sh"
export PYTHONPATH="$repo/python${PYTHONPATH:+:$PYTHONPATH}"
export MPLBACKEND=Agg
mkdir -p "$out/data"
data=$out/data

# 4. Schedules, drawn (n = 8: every transfer labelled; n = 32: arrows coloured by chunk).
for n in 8 32; do
  "$cli" synth --algo stragglar --nranks "$n" -o "$data/schedule-stragglar-n$n.json"
  python3 -m stragglar.draw "$data/schedule-stragglar-n$n.json" -o "$out/schedule-stragglar-n$n.png"
done

# 1. Scaling: the α-β model, paper's setup (1 GiB, 3 µs, 450 GiB/s).
python3 -m stragglar.figures scaling --cli "$cli" ${nranks:+--nranks "$nranks"} --data "$data/scaling.json" \
  -o "$out/scaling.png"

# 2 and 3 measure: stragglar-bench under mpirun, one run per delay, then the main job.
if [ "$model_only" = 0 ]; then
  if [ ! -x "$bench" ]; then
    echo "figures.sh: '$bench' not found (MPI build needed); use --model-only to skip the measurements" >&2
    exit 2
  fi
  mpi=(mpirun --oversubscribe -np "$np")
  [ "$(id -u)" -ne 0 ] || mpi+=(--allow-run-as-root)
  rm -f "$data"/delay-sweep-*ms.json
  echo "$(python3 -c 'from stragglar.figures import machine_description as m; print(m())')$(mpirun --version 2>/dev/null |
    sed -n '1s/^mpirun (\(.*\)) \(.*\)$/, \1 \2/p')" > "$data/machine.txt"
  for d in ${delays//,/ }; do
    (set -x; "${mpi[@]}" "$bench" -b "$size" -e "$size" -d float -n "$iters" -w 1 -c 1 \
      --algo stragglar,ring,rhd,native --straggler $((np - 1)) --delay "$d" --calibrate \
      --json "$data/delay-sweep-${d}ms.json")
  done
  if [ -n "$main_job" ]; then
    cp "$main_job" "$data/main-job.json"
  else  # the main job of scripts/run.sh, same flags
    (set -x; "${mpi[@]}" "$bench" -b "$size" -e "$size" -d float -n "$main_iters" -w 2 -c 1 \
      --algo stragglar,stragglar:1,ring,native --straggler $((np - 1)) --delay 300 --calibrate \
      --json "$data/main-job.json")
  fi
elif [ -n "$main_job" ]; then
  cp "$main_job" "$data/main-job.json"
fi

machine=()
[ ! -f "$data/machine.txt" ] || machine=(--machine "$(cat "$data/machine.txt")")
shopt -s nullglob
sweep=("$data"/delay-sweep-*ms.json)
shopt -u nullglob
if [ ${#sweep[@]} -gt 0 ]; then
  python3 -m stragglar.figures delay-sweep --cli "$cli" "${sweep[@]}" "${machine[@]}" --data "$data/delay-sweep.json" \
    -o "$out/delay-sweep.png"
else
  echo "figures.sh: no measured sweep in $data: delay-sweep.png is the model alone (paper's Fig. 8c setup)"
  python3 -m stragglar.figures delay-sweep --cli "$cli" --data "$data/delay-sweep.json" -o "$out/delay-sweep.png"
fi
if [ -f "$data/main-job.json" ]; then
  python3 -m stragglar.figures measured-vs-model "$data/main-job.json" "${machine[@]}" -o "$out/measured-vs-model.png"
else
  echo "figures.sh: no $data/main-job.json: measured-vs-model.png skipped (drop --model-only, or pass --main-job FILE)"
fi
echo "figures.sh: figures in $out/, their JSON in $data/"
