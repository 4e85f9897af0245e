#!/usr/bin/env bash
# The main job (README "Install"): set up, build, and run an 8-rank StragglAR benchmark on
# the CPU/MPI runtime, with rank 7 straggling 300 ms: auto (the default: not told which rank is
# late), StragglAR told rank 7, the paper's unpipelined schedule (stragglar:1), our Ring and native
# MPI_Allreduce side by side, each measurement printed next to the model's prediction (--calibrate).
# Extra arguments go to stragglar-bench (e.g. `bash scripts/run.sh -b 16M -e 256M -f 4`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSTRAGGLAR_CUDA="${STRAGGLAR_CUDA:-AUTO}"
cmake --build build -j"$(nproc)" --target stragglar_cli stragglar_bench
np=${NP:-8}
mpi_flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || mpi_flags+=(--allow-run-as-root)
set -x
mpirun "${mpi_flags[@]}" -np "$np" ./build/stragglar-bench -b 64M -e 64M -d float -n 10 -w 2 -c 1 \
  --algo auto,stragglar,stragglar:1,ring,native --straggler $((np - 1)) --delay 300 --calibrate --json build/main-job.json "$@"
{ set +x; } 2>/dev/null
# A plot of this run (measured exposed time beside the calibrated model, per algorithm), next to its JSON.
bash scripts/install-python-deps.sh
PYTHONPATH=python MPLBACKEND=Agg python3 -m stragglar.figures measured-vs-model build/main-job.json -o build/main-job.png
echo "run.sh: results in build/main-job.json, plotted in build/main-job.png"
