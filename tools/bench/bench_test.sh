#!/usr/bin/env bash
# stragglar-bench end to end (CTest bench_mpi, label mpi): the engine's exact check must pass
# (#wrong = 0, no error row: the bench exits 1 otherwise) for every algorithm of the table,
# auto included, every dtype × op, at n = 4 and at an odd n = 5, with a delay and a moved
# straggler; the JSON must carry one exposed time and one choice per timed iteration.
# stragglar-ucx-bench (the same engine over UCX) runs it too: CTest bench_ucx.
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
    for c in r["choices"]:
        assert c["algo"] in ("stragglar", "ring", "rhd", "allpairs", "broadcast", "native"), c
    if r["algo"] in ("stragglar", "stragglar:2"):
        assert all(c == {"algo": "stragglar", "straggler": 3} for c in r["choices"]), r["choices"]
        assert "predicted_exposed_us" in r, r
    if r["algo"] == "stragglar:2":
        assert r["pipeline"] == 2, r
print(f"n=4: JSON rows {len(d['rows'])}, per-iteration times and choices present")
EOF
test "$(head -1 "$out/bench.csv" | cut -d, -f1-6)" = "size,count,type,redop,algo,pipeline"
