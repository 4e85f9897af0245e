#!/usr/bin/env bash
# The per-round benchmark's run end to end on CPUs (bench_mpi_rounds): every point measured and
# exact, the JSON readable as the simulator reads it; a deadline leaves a partial table that
# lists what it skipped; a bad flag exits 2 naming it.
# Usage: round_bench_test.sh BENCH_MPI_ROUNDS MPIEXEC WORK_DIR
set -u
bench=$1
mpiexec=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
mpi=("$mpiexec" --allow-run-as-root --oversubscribe)
fail=0
"${mpi[@]}" -np 4 "$bench" --nranks 2-4 --sizes 1K,64K --algo stragglar,ring,native -n 3 --json "$work/full.json" \
  >"$work/full.log" 2>&1
rc=$?
python3 - "$work/full.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert d["format"] == "stragglar-round-costs/1" and d["complete"] and not d["skipped"], d
assert len(rows) == 3 * 2 * 3, len(rows)
assert {(r["algorithm"], r["nranks"], r["bytes"]) for r in rows} == {
    (a, n, b) for a in ("stragglar", "ring", "native") for n in (2, 3, 4) for b in (1024, 65536)}
for r in rows:
    assert r["wrong"] == 0 and r["host_us_per_round"] > 0 and 1 <= r["calls"] <= 3, r
    assert "gpu_us_per_round" not in r, r  # no device clock on CPUs
    assert r["rounds"] == (1 if r["algorithm"] == "native" else r["rounds"]) and r["rounds"] >= 1, r
ring4 = [r for r in rows if r["algorithm"] == "ring" and r["nranks"] == 4]
assert all(r["rounds"] == 6 for r in ring4), ring4  # 2(n-1)
print("full: ok,", len(rows), "rows")
PY
[ $rc -eq 0 ] || { echo "FAIL: full run exited $rc"; tail -5 "$work/full.log"; fail=1; }
grep -q "host time per round" "$work/full.log" || { echo "FAIL: no table printed"; fail=1; }

# A deadline already passed after the first point: the rest is listed as skipped.
"${mpi[@]}" -np 3 "$bench" --sizes 1K,4K --algo ring --deadline 0.000001 --json "$work/partial.json" >"$work/partial.log" 2>&1
rc=$?
python3 - "$work/partial.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert not d["complete"], d
assert len(d["rows"]) + len(d["skipped"]) == 2 * 2, d  # n = 2, 3 x two sizes
assert len(d["skipped"]) >= 3, d
print("partial: ok,", len(d["rows"]), "rows,", len(d["skipped"]), "skipped")
PY
[ $rc -eq 0 ] || { echo "FAIL: partial run exited $rc"; fail=1; }
grep -q "INCOMPLETE (deadline)" "$work/partial.log" || { echo "FAIL: partial run not marked"; fail=1; }

out=$("${mpi[@]}" -np 2 "$bench" --nranks 2-5 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -qF "bench_mpi_rounds: --nranks 2-5: 3 ranks, expected 2..2" <<<"$out"; then
  echo "bad flag: ok"
else
  echo "FAIL: bad flag: exit $rc"; echo "$out" | head -3; fail=1
fi
exit $fail
