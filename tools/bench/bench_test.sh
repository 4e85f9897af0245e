#!/usr/bin/env bash
# stragglar-bench end to end (CTest bench_mpi, label mpi): the runner's exact check must pass
# (#wrong = 0, no error row: the bench exits 1 otherwise) for every algorithm of the table,
# auto included, every dtype × op, at n = 4 and at an odd n = 5, with a delay and a moved
# straggler; the JSON must carry one exposed time and one choice per timed iteration.
# stragglar-ucx-bench (the same runner over UCX) runs it too: CTest bench_ucx.
#
#   bench_test.sh BENCH MPIEXEC [MPIEXEC_FLAGS...]
set -eu
bench=$1; shift
mpiexec=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
algos=stragglar,stragglar:2,ring,rhd,allpairs,broadcast,native,auto
iters=4

run() {  # n, extra flags...
  local n=$1; shift
  if ! "${mpiexec[@]}" -np "$n" "$bench" -n "$iters" -w 1 -c 1 --algo "$algos" --delay 1 \
       --move-straggler 2:0 "$@" >"$out/log" 2>&1; then
    echo "FAIL: n=$n $*"; cat "$out/log"; exit 1
  fi
}

for d in float double half bfloat16 int32 int64; do
  for o in sum prod min max avg; do
    run 5 -b 4004 -e 4004 -d "$d" -o "$o"
  done
done
echo "n=5: every dtype x op x algorithm exact"

run 4 -b 1K -e 64K -f 8 --calibrate --json "$out/bench.json" --csv "$out/bench.csv"
python3 - "$out/bench.json" "$iters" "$(basename "$bench")" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); iters = int(sys.argv[2]); tool = sys.argv[3]
assert d["tool"] == tool and d["nranks"] == 4 and d["iters"] == iters, d
assert d["move_straggler"] == [{"iter": 2, "rank": 0}], d["move_straggler"]
assert "calibration" in d and d["transport"].startswith({"stragglar-ucx-bench": "UCX"}.get(tool, "MPI")), d
algos = [r["algo"] for r in d["rows"]]
assert algos.count("auto") == 3 and algos.count("stragglar:2") == 3, algos
for r in d["rows"]:
    assert "error" not in r and r["wrong"] == 0, r
    assert len(r["exposed_us_per_iter"]) == iters and len(r["time_us_per_iter"]) == iters, r
    assert len(r["choices"]) == iters, r
    # exposed = latest exit - latest entry, time = latest exit - the common start: 0 <= exposed <= time.
    assert all(0 <= e <= t + 1e-3 for e, t in zip(r["exposed_us_per_iter"], r["time_us_per_iter"])), r
    for c in r["choices"]:
        # auto may also run stragglar-k / hierarchical: a loaded host can make two
        # ranks late together in most of the last P calls, and auto then learns that set.
        assert c["algo"] in ("stragglar", "stragglar-k", "hierarchical", "ring", "rhd", "allpairs", "broadcast", "native"), c
    if r["algo"] in ("stragglar", "stragglar:2"):
        assert all(c == {"algo": "stragglar", "straggler": 3} for c in r["choices"]), r["choices"]
        assert "predicted_exposed_us" in r, r
    if r["algo"] == "stragglar:2":
        assert r["pipeline"] == 2, r
print(f"n=4: JSON rows {len(d['rows'])}, per-iteration times and choices present")
EOF
test "$(head -1 "$out/bench.csv" | cut -d, -f1-6)" = "size,count,type,redop,algo,pipeline"

# --delay-pattern: per-rank delays per timed iteration, cycled; the fixed StragglAR
# entry is told the rank latest most often (rank 2 here); exact results; totals in the JSON.
printf '# test pattern\n0 0 3 0\n1 0 2 0\n\n0 2 3 0\n' > "$out/pattern.txt"
"${mpiexec[@]}" -np 4 "$bench" -b 4K -e 4K -n 5 -w 1 -c 1 --algo auto,stragglar,ring --delay-pattern "$out/pattern.txt" \
  --json "$out/pattern.json" >"$out/log" 2>&1 || { echo "FAIL: --delay-pattern"; cat "$out/log"; exit 1; }
python3 - "$out/pattern.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["straggler"] == 2 and d["delay_pattern"].endswith("pattern.txt"), d
for r in d["rows"]:
    assert "error" not in r and r["wrong"] == 0, r
    assert abs(r["exposed_total_us"] - sum(r["exposed_us_per_iter"])) <= 1e-6 * max(1.0, r["exposed_total_us"]), r
print("--delay-pattern: exact, straggler = the rank latest most often, totals")
EOF
# Nobody delayed (--delay 0): exposed = latest exit - latest entry of every rank, never more
# than the time (on one host both on the shared clock).
"${mpiexec[@]}" -np 4 "$bench" -b 4K -e 4K -n 3 -w 1 -c 1 --algo ring,auto --delay 0 --json "$out/nodelay.json" \
  >"$out/log" 2>&1 || { echo "FAIL: --delay 0"; cat "$out/log"; exit 1; }
python3 - "$out/nodelay.json" <<'EOF'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    assert "error" not in r and r["wrong"] == 0, r
    assert all(0 <= e <= t + 1e-3 for e, t in zip(r["exposed_us_per_iter"], r["time_us_per_iter"])), r
print("--delay 0: 0 <= exposed <= time")
EOF
# A bad pattern is refused, naming the file, the line and the value.
printf '0 0 x 0\n' > "$out/bad.txt"
"${mpiexec[@]}" -np 4 "$bench" -b 4K -e 4K -n 1 --delay-pattern "$out/bad.txt" >"$out/log" 2>&1 || true
grep -q "bad.txt line 1: 'x' is not a delay" "$out/log" || { echo "FAIL: bad pattern message"; cat "$out/log"; exit 1; }
