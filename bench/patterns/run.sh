#!/usr/bin/env bash
# Replays every pattern of bench/patterns/ (or the files named) on the MPI benchmark: auto beside
# the fixed entries (StragglAR told the rank latest most often, ring, rhd, native), 16 MiB, one
# timed call per line, and prints auto's total exposed time over the run / the best fixed entry's
# (the target: <= 1.05 on every pattern, docs/auto.md). --calibrate: auto decides with the cost model
# measured on this host in this run (without it: the engine's default host model, docs/auto.md
# "The cost model per engine").
# Each file runs twice, in two mpirun jobs: the entries in order (auto first), then reversed (auto
# last); each entry's total is the sum of its two runs. On a shared host the load drifts within a
# run by more than the 5 % asked for; the mirrored order cancels a drift that is linear in time
# (an ABBA design), and every auto row starts cold (a new process). ORDERS=1: the first run only.
# ROUNDS=R repeats the pair R times (one sweep's noise on the 2-core VM is ±15 % for the same
# choices; R = 3 narrows it) and sums every run.
# Results: build/patterns/NAME.json (in order) and NAME.reversed.json; round r > 1: NAME.rR.json, ...
#   bash bench/patterns/run.sh [FILE...]      (env: NP=8 SIZE=16M WARMUP=2 ORDERS=2 ROUNDS=1 BENCH=./build/stragglar-bench)
set -euo pipefail
cd "$(dirname "$0")/../.."
np=${NP:-8}
size=${SIZE:-16M}
orders=${ORDERS:-2}
bench=${BENCH:-./build/stragglar-bench}
mpi_flags=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || mpi_flags+=(--allow-run-as-root)
mkdir -p build/patterns
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(bench/patterns/*.txt)
for f in "${files[@]}"; do
  name=$(basename "$f" .txt)
  lines=$(grep -cv '^\s*\(#\|$\)' "$f")
  outs=()
  for ((round = 1; round <= ${ROUNDS:-1}; ++round)); do
    runs=0
    for order in auto,stragglar,ring,rhd,native native,rhd,ring,stragglar,auto; do
      [ $runs -lt "$orders" ] || break
      out=build/patterns/$name$([ "$round" -eq 1 ] || echo ".r$round")$([ $runs -eq 0 ] || echo .reversed)
      timeout 600 mpirun "${mpi_flags[@]}" -np "$np" "$bench" -b "$size" -e "$size" -d float -n "$lines" -w "${WARMUP:-2}" \
        -c 1 --calibrate --algo "$order" --delay-pattern "$f" --json "$out.json" > "$out.txt"
      outs+=("$out.json")
      runs=$((runs + 1))
    done
  done
  python3 - "$name" "${outs[@]}" <<'PY'
import json, sys
name, files = sys.argv[1], sys.argv[2:]
total, ran, bad, ratios = {}, {}, [], []
for path in files:
    j = json.load(open(path))
    rows = {r["algo"]: r for r in j["rows"]}
    bad += [f"{a} ({path})" for a, r in rows.items() if r.get("error") or (r.get("wrong") or 0) > 0]
    run = {a: r["exposed_total_us"] / 1e3 for a, r in rows.items()}
    ratios.append(run["auto"] / min(t for a, t in run.items() if a != "auto"))
    for a, t in run.items():
        total[a] = total.get(a, 0) + t
    for c in rows["auto"]["choices"]:
        k = c["algo"] + (f"({c['straggler']})" if c["straggler"] >= 0 else "")
        ran[k] = ran.get(k, 0) + 1
fixed = {a: t for a, t in total.items() if a != "auto"}
best = min(fixed, key=fixed.get)
print(f"{name:15s} auto {total['auto']:9.1f} ms  best fixed {best}(straggler {j['straggler']}) "
      f"{fixed[best]:9.1f} ms  ratio {total['auto'] / fixed[best]:.3f}  (per run: "
      + ", ".join(f"{r:.3f}" for r in ratios) + ")  "
      + " ".join(f"{a} {t:.0f}" for a, t in fixed.items())
      + f"  auto ran {ran}" + (f"  ERRORS/WRONG: {bad}" if bad else ""))
PY
done
