#!/usr/bin/env bash
# Replays every pattern of bench/patterns/ (or the files named) on the MPI benchmark: auto beside
# the fixed entries (StragglAR told the rank latest most often, ring, rhd, native), 16 MiB, one
# timed call per line, and prints auto's total exposed time over the run / the best fixed entry's
# (issue 20's target: <= 1.05 on every pattern). --calibrate: auto decides with the cost model
# measured on this host in this run (without it: the engine's default host model, docs/auto.md
# "The cost model per engine"). Results: build/patterns/NAME.json.
#   bash bench/patterns/run.sh [FILE...]      (env: NP=8 SIZE=16M WARMUP=2 BENCH=./build/stragglar-bench)
set -euo pipefail
cd "$(dirname "$0")/../.."
np=${NP:-8}
size=${SIZE:-16M}
bench=${BENCH:-./build/stragglar-bench}
mpi_flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || mpi_flags+=(--allow-run-as-root)
mkdir -p build/patterns
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(bench/patterns/*.txt)
for f in "${files[@]}"; do
  name=$(basename "$f" .txt)
  lines=$(grep -cv '^\s*\(#\|$\)' "$f")
  timeout 600 mpirun "${mpi_flags[@]}" -np "$np" "$bench" -b "$size" -e "$size" -d float -n "$lines" -w "${WARMUP:-2}" \
    -c 1 --calibrate --algo auto,stragglar,ring,rhd,native --delay-pattern "$f" --json "build/patterns/$name.json" > "build/patterns/$name.txt"
  python3 - "build/patterns/$name.json" "$name" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
rows = {r["algo"]: r for r in j["rows"]}
bad = [a for a, r in rows.items() if r.get("error") or (r.get("wrong") or 0) > 0]
total = {a: r["exposed_total_us"] / 1e3 for a, r in rows.items()}
fixed = {a: t for a, t in total.items() if a != "auto"}
best = min(fixed, key=fixed.get)
ran = {}
for c in rows["auto"]["choices"]:
    k = c["algo"] + (f"({c['straggler']})" if c["straggler"] >= 0 else "")
    ran[k] = ran.get(k, 0) + 1
print(f"{sys.argv[2]:15s} auto {total['auto']:9.1f} ms  best fixed {best}(straggler {j['straggler']}) "
      f"{fixed[best]:9.1f} ms  ratio {total['auto'] / fixed[best]:.3f}  "
      + " ".join(f"{a} {t:.0f}" for a, t in fixed.items())
      + f"  auto ran {ran}" + (f"  ERRORS/WRONG: {bad}" if bad else ""))
PY
done
